/* SPDX-License-Identifier: Apache-2.0 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "run.h"

static const char run_help[] =
    "Usage: gpufrac run [flags] -- COMMAND [ARGS...]\n"
    "\n"
    "Runs COMMAND (and everything it starts) inside a GPU fraction: CUDA and NVML\n"
    "report the fraction's memory as the device's, and an allocation past it fails\n"
    "with CUDA_ERROR_OUT_OF_MEMORY.\n"
    "\n"
    "Flags:\n"
    "  --memory AMOUNT     memory guaranteed to the fraction, per GPU\n"
    "  --limit AMOUNT      most memory the fraction may use, per GPU (>= --memory;\n"
    "                      either one alone sets both)\n"
    "  --devices LIST      GPUs to use: indices (0,1) or UUIDs (GPU-...); default:\n"
    "                      CUDA_VISIBLE_DEVICES, NVIDIA_VISIBLE_DEVICES, else all\n"
    "  --mode MODE         time-slicing (default) or sm-sharing (NVIDIA MPS)\n"
    "  --compute PORTION   SM share in (0,1] for sm-sharing, e.g. 0.25\n"
    "  --name NAME         fraction name for `gpufrac status` (default run-<pid>)\n"
    "  --state-dir DIR     where fractions live (default $GPUFRAC_STATE_DIR,\n"
    "                      /run/gpufrac, $XDG_RUNTIME_DIR/gpufrac, /tmp/gpufrac-<uid>);\n"
    "                      a DIR given here must exist\n"
    "  -h, --help          show this help\n"
    "\n"
    "AMOUNT is a quantity (8Gi, 7680Mi, 1G) or a portion of the GPU (0.5, 50%); the\n"
    "limit must hold one CUDA context (at least 64Mi).\n"
    "Exit status: COMMAND's own, 128+N when it was killed by signal N, 126/127 when\n"
    "it could not be started, 2 for a bad flag or value, 1 for other failures.\n"
    "\n"
    "Example: gpufrac run --memory 8Gi --limit 12Gi -- python train.py\n";

/* the flags that take a value: X(flag, run_opts field) */
#define RUN_FLAGS(X)      \
    X("memory", memory)   \
    X("limit", limit)     \
    X("devices", devices) \
    X("mode", mode)       \
    X("compute", compute) \
    X("name", name)       \
    X("state-dir", state_dir)

#define OPT_ENUM(flag, field) OPT_##field,
enum { OPT_BASE = 255, RUN_FLAGS(OPT_ENUM) };
#undef OPT_ENUM

#define OPT_LONG(flag, field) {flag, required_argument, NULL, OPT_##field},
static const struct option run_longopts[] = {
    RUN_FLAGS(OPT_LONG){"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};
#undef OPT_LONG

static const char **slot_of(run_opts *o, int c)
{
#define OPT_SLOT(flag, field) \
    case OPT_##field: return &o->field;
    switch (c) {
        RUN_FLAGS(OPT_SLOT)
    }
#undef OPT_SLOT
    return NULL;
}

static const char *flag_name(int c)
{
    static char buf[32];
    for (const struct option *lo = run_longopts; lo->name; lo++)
        if (lo->val == c) {
            snprintf(buf, sizeof(buf), "--%s", lo->name);
            return buf;
        }
    return "flag";
}

int run_parse(int argc, char **argv, run_opts *o, bool *done)
{
    int c;

    memset(o, 0, sizeof(*o));
    *done = false;
    opterr = 0;
    optind = 1;
    /* '+': the first word that is not a flag starts COMMAND */
    while ((c = getopt_long(argc, argv, "+:h", run_longopts, NULL)) != -1) {
        const char **slot = slot_of(o, c);
        if (slot) {
            if (*slot)
                return gf_cli_usage_error("run", "%s given twice", flag_name(c));
            *slot = optarg;
        } else if (c == 'h') {
            fputs(run_help, stdout);
            *done = true;
            return GF_EXIT_OK;
        } else if (c == ':') {
            return gf_cli_usage_error("run", "%s needs a value", flag_name(optopt));
        } else {
            return gf_cli_usage_error("run", "unknown flag \"%s\"", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return gf_cli_usage_error("run", "no command given (gpufrac run [flags] -- COMMAND "
                                         "[ARGS...])");
    o->cmd = argv + optind;
    return 0;
}
