/* SPDX-License-Identifier: Apache-2.0 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cleanup.h"
#include "cli.h"
#include "status.h"

static const char status_help[] =
    "Usage: gpufrac status [--brief] [--ended] [--state-dir DIR]\n"
    "       gpufrac status --json [--all] [--state-dir DIR]\n"
    "\n"
    "Shows, per GPU, its memory in use, the fractions on it with their request,\n"
    "limit, use, burst loan, refused allocations and evictions on that GPU, and\n"
    "their processes with the memory the driver measures for each. A user sees\n"
    "their own fractions; root sees everyone's. Fits 80 columns; a wider terminal\n"
    "also shows PEAK and MODE. Live fractions come first; on a terminal too short\n"
    "for them all, the ended ones are one count line (--ended lists them).\n"
    "\n"
    "STATE is running (its gpufrac run or container is alive), orphaned (gpufrac run\n"
    "is gone but processes of the fraction remain; their limit still holds), stale\n"
    "(only the directory is left; the next gpufrac run removes it), or, for %d\n"
    "minutes after the end, ended, evicted (gpufracd took its burst loan back) or\n"
    "killed (gpufracd's watchdog), with the reason under the row.\n"
    "\n"
    "Flags:\n"
    "  --brief           one screen (the terminal's height, else $LINES, else 24):\n"
    "                    the header on one line, no reason or exit status under\n"
    "                    ended rows, no agent events; what does not fit is cut\n"
    "                    with a line saying how much\n"
    "  --ended           list every ended fraction, even when they do not fit\n"
    "  --json            print a JSON document, version 1: {\"version\", \"gpus\",\n"
    "                    \"fractions\"} (sizes in bytes, every figure per GPU under\n"
    "                    devices[]; schema: docs/status.schema.json)\n"
    "  --all             with --json: the ended fractions too (state ended,\n"
    "                    evicted or killed, as the table says); else as --ended\n"
    "  --state-dir DIR   where fractions live (as for gpufrac run)\n"
    "  -h, --help        show this help\n";

static const struct option status_longopts[] = {
    {"json", no_argument, NULL, 'j'},
    {"all", no_argument, NULL, 'a'},
    {"brief", no_argument, NULL, 'b'},
    {"ended", no_argument, NULL, 'e'},
    {"state-dir", required_argument, NULL, 's'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* A terminal's height bounds the table; --brief is one screen even in a pipe. */
static void print_table(const status_view *v, bool brief, bool ended)
{
    status_opts o = {.cols = status_columns(),
                     .rows = isatty(STDOUT_FILENO) || brief ? status_rows() : 0,
                     .brief = brief,
                     .cut = brief,
                     .ended = ended,
                     .only_gpu = -1,
                     .hint = brief ? "status --ended lists them" : "--ended lists them"};

    if (brief && o.rows <= 0)
        o.rows = 24;
    status_print_table(v, &o, stdout);
    for (size_t i = 0; i < v->n; i++)
        if (!v->f[i].readable)
            fprintf(stderr, "gpufrac status: %s: %s\n", v->f[i].name, v->f[i].error);
}

int gf_cmd_status(int argc, char **argv)
{
    const char *state_flag = NULL;
    char state[GF_PATH_MAX];
    gf_cleanup_free status_view *v = NULL;
    gf_error err = {0};
    bool json = false, all = false, brief = false, ended = false;
    int c, rc;

    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":h", status_longopts, NULL)) != -1) {
        if (c == 'j')
            json = true;
        else if (c == 'a')
            all = true;
        else if (c == 'b')
            brief = true;
        else if (c == 'e')
            ended = true;
        else if (c == 's')
            state_flag = optarg;
        else if (c == 'h')
            return printf(status_help, GF_ENDED_KEEP_S / 60), GF_EXIT_OK;
        else if (c == ':')
            return gf_cli_usage_error("status", "--state-dir needs a value");
        else
            return gf_cli_usage_error("status", "unknown flag \"%s\"", argv[optind - 1]);
    }
    if (optind < argc)
        return gf_cli_usage_error("status", "unexpected argument \"%s\"", argv[optind]);
    if (json && (brief || ended))
        return gf_cli_usage_error("status", "--json does not go with %s (--all adds the ended)",
                                  brief ? "--brief" : "--ended");
    ended = ended || all; /* the table's --all: every ended fraction, as --ended */
    if (!(v = malloc(sizeof(*v))))
        return fputs("gpufrac status: out of memory\n", stderr), GF_EXIT_FAIL;
    if (gf_state_dir(state_flag, false, state, sizeof(state), &err) < 0 ||
        status_collect(state, !json || all, v, &err) < 0)
        return gf_cli_fail("status", GF_EXIT_FAIL, &err);
    rc = GF_EXIT_OK;
    if (json) {
        if (status_print_json(v, &err) < 0)
            rc = gf_cli_fail("status", GF_EXIT_FAIL, &err);
    } else {
        print_table(v, brief, ended);
    }
    status_view_free(v);
    return rc;
}
