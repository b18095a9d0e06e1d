#include "judge/judge_process.h"

int main(int argc, char** argv) { return leap::judge_process_main(argc, argv); }
