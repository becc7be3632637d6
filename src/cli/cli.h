/* The icl command-line tool: one function per subcommand. Each returns the process exit status:
 * 0 success, 1 runtime failure, 2 bad input or usage (message on stderr). */
#ifndef ICL_CLI_H
#define ICL_CLI_H

int icl_cmd_devices(int argc, char **argv);
int icl_cmd_info(int argc, char **argv);
int icl_cmd_tokenize(int argc, char **argv);
int icl_cmd_run(int argc, char **argv);
int icl_cmd_perplexity(int argc, char **argv);
int icl_cmd_script(int argc, char **argv);
int icl_cmd_repl(int argc, char **argv);
int icl_cmd_bench(int argc, char **argv);
int icl_cmd_testmodel(int argc, char **argv);
/* icl sweep (src/cli/cmd_sweep.c, sweep_*.c; docs/sweeps.md). */
int icl_cmd_sweep(int argc, char **argv);

/* icl bench model / icl bench hooks (src/cli/bench_model.c); argv[0] is the subcommand. */
int icl_bench_model(int argc, char **argv);
int icl_bench_hooks(int argc, char **argv);
/* icl bench train (src/cli/bench_train.c). */
int icl_bench_train(int argc, char **argv);

#endif
