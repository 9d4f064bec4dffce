/* SPDX-License-Identifier: Apache-2.0 */
/* gpufrac top: the status table, redrawn every interval until interrupted.
 * On a terminal it redraws in place on the alternate screen, fits the
 * terminal's height (the live fractions first), and always gives the
 * terminal back as it found it; to a pipe it prints plain tables. */
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "status.h"

static const char top_help[] =
    "Usage: gpufrac top [--interval SECONDS] [--iterations N] [--state-dir DIR]\n"
    "\n"
    "Shows the fractions on this host like gpufrac status and redraws the table\n"
    "in place every interval (default 1 s) until you press q (or Ctrl-C). It fits\n"
    "the terminal: live fractions first, the ended ones as one count line. BURST is\n"
    "memory on loan from gpufracd above the fraction's request; EVICT counts\n"
    "processes the agent terminated to take a loan back.\n"
    "\n"
    "Keys: s sorts by name, used, limit or owner; f shows all, running, mine or\n"
    "one GPU's fractions; e lists the ended ones (or hides them); q quits.\n"
    "To a pipe it prints every table whole, one after the other.\n"
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

/* What the keys chose: s cycles the sort, f the filter, e the ended rows. */
typedef struct top_ui {
    int sort;   /* SORT_* */
    int filter; /* FILTER_*, then FILTER_GPU + the GPU's place in the list */
    bool ended; /* list the ended fractions (else one count line) */
    bool tty;   /* redraw in place on a terminal */
} top_ui;

enum { SORT_NAME, SORT_USED, SORT_LIMIT, SORT_OWNER, SORT_N };
enum { FILTER_ALL, FILTER_RUNNING, FILTER_MINE, FILTER_GPU };

static const char *const sort_names[SORT_N] = {"name", "used", "limit", "owner"};
static int sort_key;

static uint64_t limit_of(const status_fraction *f)
{
    uint64_t sum = 0;
    for (size_t d = 0; d < f->n_devices; d++)
        sum += f->devices[d].limit;
    return sum;
}

/* Live fractions before ended ones whatever the key; the larger first for sizes. */
static int by_key(const void *a, const void *b)
{
    const status_fraction *x = a, *y = b;
    int c = 0;

    if (x->ended != y->ended)
        return x->ended ? 1 : -1;
    if (sort_key == SORT_USED)
        c = (y->used > x->used) - (y->used < x->used);
    else if (sort_key == SORT_LIMIT)
        c = (limit_of(y) > limit_of(x)) - (limit_of(y) < limit_of(x));
    else if (sort_key == SORT_OWNER)
        c = strcmp(x->owner, y->owner);
    return c ? c : strcmp(x->name, y->name);
}

static bool on_gpu(const status_fraction *f, const gf_gpu *g)
{
    for (size_t d = 0; d < f->n_devices; d++)
        if (strcmp(f->devices[d].uuid, g->uuid) == 0)
            return true;
    return false;
}

static bool passes(const top_ui *ui, const status_view *v, const status_fraction *f)
{
    if (ui->filter == FILTER_RUNNING)
        return f->readable && !f->ended && f->state == GF_FRACTION_RUNNING;
    if (ui->filter == FILTER_MINE)
        return f->readable && f->uid == getuid();
    if (ui->filter >= FILTER_GPU)
        return on_gpu(f, &v->gpus.gpus[ui->filter - FILTER_GPU]);
    return true;
}

static void filter_name(const top_ui *ui, const status_view *v, char *out, size_t len)
{
    static const char *const names[] = {"all", "running", "mine"};

    if (ui->filter >= FILTER_GPU)
        snprintf(out, len, "gpu %u", v->gpus.gpus[ui->filter - FILTER_GPU].index);
    else
        snprintf(out, len, "%s", names[ui->filter]);
}

/* Keeps the fractions the filter lets through, in the chosen order. */
static void arrange(const top_ui *ui, status_view *v, size_t *live, size_t *ended)
{
    size_t n = 0;

    *live = *ended = 0;
    for (size_t i = 0; i < v->n; i++)
        if (passes(ui, v, &v->f[i])) {
            v->f[n++] = v->f[i];
            *live += !v->f[i].ended;
            *ended += v->f[i].ended;
        }
    v->n = n;
    sort_key = ui->sort;
    if (n)
        qsort(v->f, n, sizeof(*v->f), by_key);
}

/* The screen in place: home, each line then clear to its end, clear below. */
static void paint(const char *text)
{
    fputs("\033[H", stdout);
    for (const char *ln = text; *ln;) {
        size_t n = strcspn(ln, "\n");
        fwrite(ln, 1, n, stdout);
        fputs("\033[K", stdout);
        ln += n;
        if (*ln == '\n' && *++ln)
            fputs("\r\n", stdout);
    }
    fputs("\033[J", stdout);
}

/* -1 with err set when the state cannot be read (said after the screen is back). */
static int draw(const char *state, const top_ui *chosen, gf_error *err)
{
    static status_view v;
    char stamp[32], filter[32], title[200], *buf = NULL;
    size_t live, ended, len = 0;
    time_t now = time(NULL);
    FILE *m;

    if (status_collect(state, true, &v, err) < 0)
        return -1;
    top_ui shown = *chosen, *ui = &shown;
    if (ui->filter >= FILTER_GPU && (!v.have_gpus || (size_t)(ui->filter - FILTER_GPU) >= v.gpus.n))
        ui->filter = FILTER_ALL; /* that GPU is gone from NVML's list */
    arrange(ui, &v, &live, &ended);
    filter_name(ui, &v, filter, sizeof(filter));
    strftime(stamp, sizeof(stamp), "%H:%M:%S", localtime(&now));
    snprintf(title, sizeof(title), "gpufrac top %s  %zu live %zu ended  sort %s  filter %s  %s",
             stamp, live, ended, sort_names[ui->sort], filter,
             ui->tty ? "s f e, q to quit" : "q to quit");
    status_opts o = {.cols = status_columns(), .only_gpu = -1, .title = title};
    if (ui->filter >= FILTER_GPU)
        o.only_gpu = (int)v.gpus.gpus[ui->filter - FILTER_GPU].index;
    if (!ui->tty) { /* a pipe: plain lines, everything, as status */
        status_print_table(&v, &o, stdout);
        fflush(stdout);
        status_view_free(&v);
        return GF_EXIT_OK;
    }
    o.rows = status_rows() > 0 ? status_rows() : 24;
    o.cut = true;
    o.ended = ui->ended;
    o.hide_ended = !ui->ended;
    o.hint = ui->ended ? "e hides the ended" : "e shows them";
    if ((m = open_memstream(&buf, &len))) {
        status_print_table(&v, &o, m);
        if (fclose(m) == 0 && buf)
            paint(buf);
        free(buf);
    }
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

/* The alternate screen, the cursor hidden: the shell's screen and scrollback
 * come back as they were when top ends. */
static void screen_on(const top_ui *ui)
{
    if (ui->tty)
        fputs("\033[?1049h\033[?25l\033[H\033[2J", stdout);
}

static void screen_off(const top_ui *ui)
{
    if (ui->tty) {
        fputs("\033[?25h\033[?1049l", stdout);
        fflush(stdout);
    }
}

enum { KEY_NONE, KEY_QUIT, KEY_REDRAW };

/* One key: q (or Q) quits; s, f and e change the view. */
static int apply_key(char c, top_ui *ui, size_t n_gpus)
{
    if (c == 'q' || c == 'Q')
        return KEY_QUIT;
    if (c == 's')
        ui->sort = (ui->sort + 1) % SORT_N;
    else if (c == 'f')
        ui->filter = (ui->filter + 1) % (FILTER_GPU + (int)n_gpus);
    else if (c == 'e')
        ui->ended = !ui->ended;
    else
        return KEY_NONE;
    return KEY_REDRAW;
}

/* Waits up to the interval, or until a key changes the view or quits. */
static int wait_key(double interval, top_ui *ui, size_t n_gpus)
{
    struct pollfd p = {.fd = STDIN_FILENO, .events = POLLIN};
    int ms = (int)(interval * 1000.0), k = KEY_NONE;
    char c;

    if (!tty_raw) {
        struct timespec ts = {(time_t)interval,
                              (long)((interval - (double)(time_t)interval) * 1e9)};
        nanosleep(&ts, NULL);
        return KEY_NONE;
    }
    if (poll(&p, 1, ms) <= 0)
        return KEY_NONE;
    while (k != KEY_QUIT && read(STDIN_FILENO, &c, 1) == 1) {
        int r = apply_key(c, ui, n_gpus);
        k = r > k ? r : k;
    }
    return k;
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

static size_t gpu_count(void)
{
    gf_gpu_list gpus;
    gf_error ignored;

    return gf_gpus_probe(&gpus, &ignored) == 0 ? gpus.n : 0;
}

int gf_cmd_top(int argc, char **argv)
{
    const char *state_flag = NULL;
    char state[GF_PATH_MAX];
    gf_error err = {0};
    top_ui ui = {.tty = isatty(STDOUT_FILENO)};
    double interval = 1.0;
    long iterations = -1;
    size_t n_gpus;
    bool done;
    int rc;

    if ((rc = parse_top(argc, argv, &interval, &iterations, &state_flag, &done)) || done)
        return rc;
    if (gf_state_dir(state_flag, false, state, sizeof(state), &err) < 0)
        return gf_cli_fail("top", GF_EXIT_FAIL, &err);
    n_gpus = gpu_count();
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    keys_on();
    screen_on(&ui);
    rc = GF_EXIT_OK;
    for (long i = 0; !stop && (iterations < 0 || i < iterations); i++) {
        if (i > 0 && wait_key(interval, &ui, n_gpus) == KEY_QUIT)
            break;
        if (stop || (rc = draw(state, &ui, &err)) != GF_EXIT_OK)
            break;
    }
    screen_off(&ui);
    keys_off();
    return rc < 0 ? gf_cli_fail("top", GF_EXIT_FAIL, &err) : rc;
}
