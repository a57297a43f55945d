/* cli.h: subcommands of the tern binary; each lives in its own tools/<name>.c and returns the
 * process exit status (0 ok, 1 runtime error, 2 usage error). */
#ifndef TERN_TOOLS_CLI_H
#define TERN_TOOLS_CLI_H

int cmd_version(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_bench_kernel(int argc, char **argv);   /* tools/bench_kernel.c */
int cmd_bench_spec(int argc, char **argv);     /* tools/bench_spec.c */
int cmd_info(int argc, char **argv);     /* tools/info.c (owner: gguf) */
int cmd_tokenize(int argc, char **argv);   /* tools/tokenize.c */
int cmd_synth(int argc, char **argv);      /* tools/synth.c */
int cmd_quantize(int argc, char **argv);   /* tools/quantize.c */
int cmd_chat(int argc, char **argv);       /* tools/chat.c (owner: app) */
int cmd_serve(int argc, char **argv);      /* tools/serve.c (owner: app) */

#endif /* TERN_TOOLS_CLI_H */
