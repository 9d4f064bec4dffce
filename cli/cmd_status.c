/* SPDX-License-Identifier: Apache-2.0 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cleanup.h"
#include "cli.h"
#include "status.h"

static const char status_help[] =
    "Usage: gpufrac status [--brief | --json [--all]] [--state-dir DIR]\n"
    "\n"
    "Shows, per GPU, its memory in use, the fractions on it with their request,\n"
    "limit, use, burst loan, refused allocations and evictions on that GPU, and\n"
    "their processes with the memory the driver measures for each. A user sees\n"
    "their own fractions; root sees everyone's. Fits 80 columns; a wider terminal\n"
    "also shows PEAK and MODE.\n"
    "\n"
    "STATE is running (its gpufrac run or container is alive), orphaned (gpufrac run\n"
    "is gone but processes of the fraction remain; their limit still holds), stale\n"
    "(only the directory is left; the next gpufrac run removes it), or, for %d\n"
    "minutes after the end, ended, evicted (gpufracd took its burst loan back) or\n"
    "killed (gpufracd's watchdog), with the reason under the row.\n"
    "\n"
    "Flags:\n"
    "  --brief           one screen: the header on one line, no reason or exit\n"
    "                    status under ended rows, no agent events\n"
    "  --json            print a JSON array of the live fractions (sizes in bytes,\n"
    "                    every figure per GPU under devices[])\n"
    "  --all             with --json: the ended fractions too (state \"ended\")\n"
    "  --state-dir DIR   where fractions live (as for gpufrac run)\n"
    "  -h, --help        show this help\n";

static const struct option status_longopts[] = {
    {"json", no_argument, NULL, 'j'},  {"all", no_argument, NULL, 'a'},
    {"brief", no_argument, NULL, 'b'}, {"state-dir", required_argument, NULL, 's'},
    {"help", no_argument, NULL, 'h'},  {NULL, 0, NULL, 0},
};

int gf_cmd_status(int argc, char **argv)
{
    const char *state_flag = NULL;
    char state[GF_PATH_MAX];
    gf_cleanup_free status_view *v = NULL;
    gf_error err = {0};
    bool json = false, all = false, brief = false;
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
        status_print_table(v, status_columns(), brief);
    }
    status_view_free(v);
    return rc;
}
