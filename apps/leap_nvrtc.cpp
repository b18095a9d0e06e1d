#include "compile_farm/nvrtc_process.h"

int main(int argc, char** argv) { return leap::nvrtc_process_main(argc, argv); }
