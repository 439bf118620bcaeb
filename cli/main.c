/* main.c — the colibri binary: the command line as given (cli_main, colibri.c). */
#include "cli.h"

int main(int argc, char **argv) { return cli_main(argc, argv); }
