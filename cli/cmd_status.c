#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "status.h"

static const char status_help[] =
    "Usage: gpufrac status [--json] [--state-dir DIR]\n"
    "\n"
    "Lists the fractions on this host: their memory request, limit and use per GPU,\n"
    "allocations refused over the limit, and the processes inside.\n"
    "\n"
    "STATE is running (its gpufrac run is alive), orphaned (gpufrac run is gone but\n"
    "processes of the fraction remain; their limit still holds) or stale (only the\n"
    "directory is left; the next gpufrac run removes it).\n"
    "\n"
    "Flags:\n"
    "  --json            print a JSON array (sizes in bytes)\n"
    "  --state-dir DIR   where fractions live (as for gpufrac run)\n"
    "  -h, --help        show this help\n";

static const struct option status_longopts[] = {
    {"json", no_argument, NULL, 'j'},
    {"state-dir", required_argument, NULL, 's'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

int gf_cmd_status(int argc, char **argv)
{
    const char *state_flag = NULL;
    char state[GF_PATH_MAX];
    status_fraction *f = NULL;
    gf_error err = {0};
    bool json = false;
    size_t n;
    int c, rc;

    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":h", status_longopts, NULL)) != -1) {
        if (c == 'j')
            json = true;
        else if (c == 's')
            state_flag = optarg;
        else if (c == 'h')
            return fputs(status_help, stdout), GF_EXIT_OK;
        else if (c == ':')
            return gf_cli_usage_error("status", "--state-dir needs a value");
        else
            return gf_cli_usage_error("status", "unknown flag \"%s\"", argv[optind - 1]);
    }
    if (optind < argc)
        return gf_cli_usage_error("status", "unexpected argument \"%s\"", argv[optind]);
    if (gf_state_dir(state_flag, false, state, sizeof(state), &err) < 0 ||
        status_collect(state, &f, &n, &err) < 0)
        return gf_cli_fail("status", GF_EXIT_FAIL, &err);
    rc = GF_EXIT_OK;
    if (json) {
        if (status_print_json(f, n, &err) < 0)
            rc = gf_cli_fail("status", GF_EXIT_FAIL, &err);
    } else {
        status_print_table(f, n, state);
    }
    free(f);
    return rc;
}
