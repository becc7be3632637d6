/* icl: dispatch to subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_common.h"
#include "icl/icl.h"

typedef struct command {
  const char *name;
  int (*fn)(int argc, char **argv);
  const char *help;
} command;

static const command COMMANDS[] = {
    {"script", icl_cmd_script, "FILE.lua [args...]   run a Lua experiment script"},
    {"repl", icl_cmd_repl, "                     interactive Lua REPL (also: icl with no arguments)"},
    {"run", icl_cmd_run, "-m MODEL -p TEXT     generate text"},
    {"perplexity", icl_cmd_perplexity, "-m MODEL -f FILE     perplexity over a text file"},
    {"tokenize", icl_cmd_tokenize, "MODEL TEXT           print token ids (--pieces for pieces)"},
    {"info", icl_cmd_info, "MODEL.gguf           model metadata (--tensors, --json)"},
    {"devices", icl_cmd_devices, "                     list Vulkan devices and the backend choice"},
    {"bench", icl_cmd_bench, "[ops|...]            benchmarks"},
    {"testmodel", icl_cmd_testmodel, "--like M -o FILE     random weights in a real model's exact shapes"},
    {"sweep", icl_cmd_sweep, "EXP.lua --grid N=V   one experiment over a grid of flags and seeds, here or on Slurm"},
};

static void usage(FILE *f) {
  fprintf(f, "icl %s: inference core for in-context-learning interpretability\n\nusage: icl COMMAND [args]\n\n",
          ICL_VERSION);
  for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
    fprintf(f, "  icl %-10s %s\n", COMMANDS[i].name, COMMANDS[i].help);
  fprintf(f, "\nRun 'icl COMMAND --help' for a command's options.\n");
}

int main(int argc, char **argv) {
  if (argc < 2) return icl_cmd_repl(argc, argv);
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    usage(stdout);
    return 0;
  }
  if (!strcmp(argv[1], "--version")) {
    printf("icl %s\n", ICL_VERSION);
    return 0;
  }
  for (size_t i = 0; i < sizeof COMMANDS / sizeof COMMANDS[0]; i++)
    if (!strcmp(argv[1], COMMANDS[i].name)) return cli_finish_output(argv[1], COMMANDS[i].fn(argc - 1, argv + 1));
  fprintf(stderr, "icl: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
