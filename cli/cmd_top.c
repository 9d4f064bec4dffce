/* SPDX-License-Identifier: Apache-2.0 */
/* gpufrac top: the status table, redrawn every interval until interrupted. */
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "status.h"

static const char top_help[] =
    "Usage: gpufrac top [--interval SECONDS] [--iterations N] [--state-dir DIR]\n"
    "\n"
    "Shows the fractions on this host like gpufrac status and redraws the table\n"
    "every interval (default 1 s) until you press q (or Ctrl-C). BURST is memory on loan\n"
    "from gpufracd above the fraction's request; EVICTED counts processes the\n"
    "agent terminated to take a loan back.\n"
    "\n"
    "Flags:\n"
    "  --interval S      seconds between redraws (0.1 to 3600)\n"
    "  --iterations N    stop after N redraws (default: until interrupted)\n"
    "  --state-dir DIR   where fractions live (as for gpufrac run)\n"
    "  -h, --help        show this help\n";

static const struct option top_longopts[] = {
    {"interval", required_argument, NULL, 'i'},
    {"iterations", required_argument, NULL, 'n'},
    {"state-dir", required_argument, NULL, 's'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static int draw(const char *state, bool clear)
{
    static status_view v;
    gf_error err = {0};
    char stamp[32];
    time_t now = time(NULL);

    if (status_collect(state, true, &v, &err) < 0)
        return gf_cli_fail("top", GF_EXIT_FAIL, &err);
    strftime(stamp, sizeof(stamp), "%H:%M:%S", localtime(&now));
    if (clear)
        fputs("\033[H\033[2J", stdout);
    printf("gpufrac top - %s - %zu fraction(s) - q to quit\n", stamp, v.n);
    status_print_table(&v, status_columns(), false);
    fflush(stdout);
    status_view_free(&v);
    return GF_EXIT_OK;
}

/* Keys without Enter and without echo while top runs on a terminal. */
static struct termios saved_tty;
static bool tty_raw;

static void keys_on(void)
{
    struct termios t;

    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_tty) < 0)
        return;
    t = saved_tty;
    t.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
    t.c_cc[VMIN] = 0;
    t.c_cc[VTIME] = 0;
    tty_raw = tcsetattr(STDIN_FILENO, TCSANOW, &t) == 0;
}

static void keys_off(void)
{
    if (tty_raw)
        tcsetattr(STDIN_FILENO, TCSANOW, &saved_tty);
    tty_raw = false;
}

/* Waits up to the interval; true when q (or Q, or end of input on a
 * terminal) asks to quit. */
static bool wait_key(double interval)
{
    struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
    int ms = (int)(interval * 1000.0);
    char c;

    if (!tty_raw) {
        struct timespec ts = {(time_t)interval,
                              (long)((interval - (double)(time_t)interval) * 1e9)};
        nanosleep(&ts, NULL);
        return false;
    }
    if (poll(&p, 1, ms) <= 0)
        return false;
    while (read(STDIN_FILENO, &c, 1) == 1)
        if (c == 'q' || c == 'Q')
            return true;
    return false;
}

static int parse_top(int argc, char **argv, double *interval, long *iterations,
                     const char **state_flag, bool *done)
{
    char *end;
    int c;

    opterr = 0;
    optind = 1;
    *done = false;
    while ((c = getopt_long(argc, argv, ":h", top_longopts, NULL)) != -1) {
        if (c == 'i') {
            *interval = strtod(optarg, &end);
            if (*end || !(*interval >= 0.1 && *interval <= 3600))
                return gf_cli_usage_error("top",
                                          "--interval: \"%s\" is not a number of seconds "
                                          "from 0.1 to 3600",
                                          optarg);
        } else if (c == 'n') {
            *iterations = strtol(optarg, &end, 10);
            if (*end || *iterations < 1)
                return gf_cli_usage_error("top",
                                          "--iterations: \"%s\" is not a whole number "
                                          "of at least 1",
                                          optarg);
        } else if (c == 's') {
            *state_flag = optarg;
        } else if (c == 'h') {
            fputs(top_help, stdout);
            *done = true;
            return GF_EXIT_OK;
        } else if (c == ':') {
            return gf_cli_usage_error("top", "%s needs a value", argv[optind - 1]);
        } else {
            return gf_cli_usage_error("top", "unknown flag \"%s\"", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return gf_cli_usage_error("top", "unexpected argument \"%s\"", argv[optind]);
    return GF_EXIT_OK;
}

int gf_cmd_top(int argc, char **argv)
{
    const char *state_flag = NULL;
    char state[GF_PATH_MAX];
    gf_error err = {0};
    double interval = 1.0;
    long iterations = -1;
    bool done;
    int rc;

    if ((rc = parse_top(argc, argv, &interval, &iterations, &state_flag, &done)) || done)
        return rc;
    if (gf_state_dir(state_flag, false, state, sizeof(state), &err) < 0)
        return gf_cli_fail("top", GF_EXIT_FAIL, &err);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    keys_on();
    rc = GF_EXIT_OK;
    for (long i = 0; !stop && (iterations < 0 || i < iterations); i++) {
        if (i > 0 && wait_key(interval))
            break;
        if ((rc = draw(state, isatty(STDOUT_FILENO))) != GF_EXIT_OK)
            break;
    }
    keys_off();
    return rc;
}
