// The judge process (leap-evald): its command line and serving loop; apps/leap_evald.cpp is its main.
#pragma once

namespace leap {
int judge_process_main(int argc, char** argv);
}  // namespace leap
