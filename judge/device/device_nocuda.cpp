// Built when CUDA was not found at configure time.
#include "common/error.h"
#include "judge/device/device.h"

namespace leap {

std::unique_ptr<Device> make_cuda_device(int) {
  throw LeapError("this leap-evald was built without CUDA (no CUDA toolkit at configure time)");
}

}  // namespace leap
