/* The host pass of an NVRTC-compiled candidate needs only the runtime API (compile_farm/cuda_split). */
#include <cuda_runtime_api.h>
