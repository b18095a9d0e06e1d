// The runner process (leap-runner): one candidate's disposable process; apps/leap_runner.cpp is its main.
#pragma once

namespace leap {
int runner_process_main(int argc, char** argv);
}  // namespace leap
