// gputrain's entry point: the command line, without test seams.
#include "commands.h"

int main(int argc, char** argv) { return gputrain::app::run_cli(argc, argv); }
