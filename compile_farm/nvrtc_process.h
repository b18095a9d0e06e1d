// The NVRTC device pass (leap-nvrtc) as a process of its own; apps/leap_nvrtc.cpp is its main.
#pragma once

namespace leap {
int nvrtc_process_main(int argc, char** argv);
}  // namespace leap
