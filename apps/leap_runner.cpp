#include "judge/runner/runner_process.h"

int main(int argc, char** argv) { return leap::runner_process_main(argc, argv); }
