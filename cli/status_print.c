/* SPDX-License-Identifier: Apache-2.0 */
/* The status table, laid out like nvidia-smi: a block per GPU (index, name,
 * used/total, mode), the fractions on it with their figures on that GPU,
 * and under each its processes with the memory the driver measures. Fits
 * 80 columns; a wider terminal gets wider names and more columns. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "quantity.h"
#include "statedir.h"
#include "status.h"

int status_columns(void)
{
    struct winsize ws;
    const char *env = getenv("COLUMNS");
    int cols = 0;

    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0)
        cols = ws.ws_col;
    if (cols <= 0 && env)
        cols = atoi(env);
    return cols < 80 ? 80 : cols > 400 ? 400 : cols;
}

int status_rows(void)
{
    struct winsize ws;
    const char *env = getenv("LINES");
    int rows = 0;

    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0)
        rows = ws.ws_row;
    if (rows <= 0 && env)
        rows = atoi(env);
    return rows < 0 ? 0 : rows > 1000 ? 1000 : rows;
}

/* 6 characters at most: "0", "512K", "300M", "1.5G", "15.8G", "1.2T". */
static void compact(uint64_t b, char *out, size_t len)
{
    if (b == 0)
        snprintf(out, len, "0");
    else if (b < GF_MIB)
        snprintf(out, len, "%lluK", (unsigned long long)((b + 1023) / 1024));
    else if (b < GF_GIB)
        snprintf(out, len, "%lluM", (unsigned long long)(b / GF_MIB));
    else if (b < 1000 * GF_GIB)
        snprintf(out, len, "%.1fG", (double)b / (double)GF_GIB);
    else
        snprintf(out, len, "%.1fT", (double)b / (double)GF_GIB / 1024.0);
}

const char *status_state_name(const status_fraction *f)
{
    if (!f->readable)
        return "unreadable";
    if (f->ended)
        return !f->n_terminated ? "ended" : f->last_by_watchdog ? "killed" : "evicted";
    return gf_fraction_state_name(f->state);
}

/* Who the fraction is: the pod's namespace/pod/container; a Docker or
 * Podman container (no pod) as engine/name; else the fraction's name. */
static void label_of(const status_fraction *f, char *out, size_t len)
{
    if (strcmp(f->pod, "-") == 0 && f->container[0] &&
        (strcmp(f->ns, "docker") == 0 || strcmp(f->ns, "podman") == 0))
        snprintf(out, len, "%s/%s", f->ns, f->container);
    else if (f->pod[0])
        snprintf(out, len, "%s/%s/%s", f->ns, f->pod, f->container);
    else
        snprintf(out, len, "%s", f->name);
}

/* Cuts s to width, marking the cut with "..". */
static void fit(char *s, int width)
{
    if (width > 2 && (int)strlen(s) > width) {
        s[width - 2] = '.';
        s[width - 1] = '.';
        s[width] = '\0';
    }
}

/* Prints text in lines of at most cols, broken at spaces. */
static void wrap_to(FILE *out, const char *text, int cols, const char *first, const char *rest)
{
    const char *lead = first;

    while (*text) {
        int room = cols - (int)strlen(lead);
        int n = (int)strlen(text);
        if (n > room) {
            n = room;
            while (n > room / 2 && text[n] != ' ')
                n--;
            if (text[n] != ' ')
                n = room;
        }
        fprintf(out, "%s%.*s\n", lead, n, text);
        text += n;
        while (*text == ' ')
            text++;
        lead = rest;
    }
}

void status_wrap(const char *text, int cols, const char *first, const char *rest)
{
    wrap_to(stdout, text, cols, first, rest);
}

typedef struct layout {
    int cols, label_w, owner_w;
    bool wide;       /* room for MODE and PEAK */
    bool brief;      /* one screen: no lines under ended rows, no blank lines */
    bool procs;      /* process lines under live rows */
    bool show_ended; /* ended rows; else one count line */
    bool events;     /* the agent's last events */
    int only_gpu;
    FILE *out;
} layout;

static layout plan(const status_view *v, const status_opts *o, int level, FILE *out)
{
    int cols = o->cols;
    /* fixed: indent 2, STATE 8, 5 sizes of 6, DENIED 6, EVICT 5, separators */
    layout l = {.cols = cols, .owner_w = 8, .label_w = 18, .brief = o->brief, .out = out};

    /* what gives way, level by level, when the table does not fit its rows */
    l.show_ended = o->ended || (!o->hide_ended && level == 0);
    l.procs = level < 2;
    l.events = !o->brief && level < 2;
    l.only_gpu = o->only_gpu;
    int longest = 8;

    for (size_t i = 0; i < v->n; i++) {
        char lab[300];
        if (v->f[i].ended && !l.show_ended)
            continue;
        label_of(&v->f[i], lab, sizeof(lab));
        if ((int)strlen(lab) > longest)
            longest = (int)strlen(lab);
    }
    l.wide = cols >= 112;
    int fixed = 2 + 9 + 1 + 9 + 4 * 7 + 7 + 6 + (l.wide ? 14 + 7 : 0);
    int room = cols - fixed - 1;
    l.label_w = longest < room ? longest : room;
    if (l.label_w < 12)
        l.label_w = 12;
    return l;
}

static void heading(const layout *l)
{
    fprintf(l->out, "  %-*s %-*s %-8s %6s %6s %6s %6s %6s %5s", l->owner_w, "OWNER", l->label_w,
            "FRACTION", "STATE", "REQ", "LIMIT", "USED", "BURST", "DENIED", "EVICT");
    if (l->wide)
        fprintf(l->out, " %6s %-13s", "PEAK", "MODE");
    fputc('\n', l->out);
}

static void proc_lines(const layout *l, const status_view *v, const status_fraction *f,
                       const gf_gpu *g)
{
    for (size_t p = 0; p < f->n_pids && p < STATUS_PIDS_MAX; p++) {
        char name[64], mem[16] = "-";
        bool on_gpu = false;
        for (size_t k = 0; k < v->n_procs; k++)
            if (g && v->procs[k].gpu == g->index && v->procs[k].pid == f->pids[p]) {
                compact(v->procs[k].used, mem, sizeof(mem));
                on_gpu = true;
            }
        if (g && !on_gpu && v->n_procs && f->n_devices > 1)
            continue; /* a process of the fraction that does not use this GPU */
        status_proc_name(f->pids[p], name, sizeof(name));
        fprintf(l->out, "      pid %-8d %-24.24s %6s%s\n", (int)f->pids[p], name, mem,
                on_gpu ? " (driver)" : "");
    }
    if (f->n_pids > STATUS_PIDS_MAX)
        fprintf(l->out, "      ... %zu more processes (gpufrac status --json lists %d)\n",
                f->n_pids - STATUS_PIDS_MAX, STATUS_PIDS_MAX);
}

static void fraction_row(const layout *l, const status_view *v, const status_fraction *f,
                         const status_device *d, const gf_gpu *g)
{
    char owner[40], lab[300], req[16], lim[16], used[16], burst[16], peak[16], mode[32];

    if (f->ended && !l->show_ended)
        return;
    snprintf(owner, sizeof(owner), "%s", f->readable ? f->owner : "?");
    fit(owner, l->owner_w);
    label_of(f, lab, sizeof(lab));
    fit(lab, l->label_w);
    fprintf(l->out, "  %-*s %-*s %-8s", l->owner_w, owner, l->label_w, lab, status_state_name(f));
    if (!f->readable || !d) {
        fprintf(l->out, "  %s\n", f->readable ? "-" : f->error);
        return;
    }
    compact(d->request, req, sizeof(req));
    compact(d->limit, lim, sizeof(lim));
    compact(d->used, used, sizeof(used));
    compact(d->lent, burst, sizeof(burst));
    fprintf(l->out, " %6s %6s %6s %6s %6llu %5llu", req, lim, used, burst,
            (unsigned long long)d->denied, (unsigned long long)d->evictions);
    if (l->wide) {
        compact(d->peak, peak, sizeof(peak));
        if (f->mode == GF_MODE_SM_SHARING)
            snprintf(mode, sizeof(mode), "sm-sharing/%d%%", f->compute_percent);
        else
            snprintf(mode, sizeof(mode), "%s", gf_mode_name(f->mode));
        fprintf(l->out, " %6s %-13s", peak, mode);
    }
    fputc('\n', l->out);
    if (f->ended && l->brief)
        return;
    if (f->ended) {
        char why[900];
        if (f->n_terminated)
            snprintf(why, sizeof(why), "%s", f->last_reason);
        else
            snprintf(why, sizeof(why), "ended with exit status %d", f->exit_code);
        wrap_to(l->out, why, l->cols, "      ", "        ");
        return;
    }
    if (l->procs)
        proc_lines(l, v, f, g);
}

static const char *gpu_mode(const status_view *v, const gf_gpu *g)
{
    for (size_t i = 0; i < v->n; i++)
        for (size_t d = 0; d < v->f[i].n_devices; d++)
            if (!v->f[i].ended && v->f[i].readable && strcmp(v->f[i].devices[d].uuid, g->uuid) == 0)
                return gf_mode_name(v->f[i].mode);
    return "no fractions";
}

static void gpu_block(const layout *l, const status_view *v, const gf_gpu *g)
{
    char used[32], total[32], guar[32], title[200];
    uint64_t guaranteed = 0;
    int n = 0;

    for (size_t i = 0; i < v->n; i++)
        for (size_t d = 0; d < v->f[i].n_devices; d++)
            if (!v->f[i].ended && strcmp(v->f[i].devices[d].uuid, g->uuid) == 0) {
                guaranteed += v->f[i].devices[d].request;
                n++;
            }
    gf_bytes_human(g->used, used, sizeof(used));
    gf_bytes_human(g->total, total, sizeof(total));
    gf_bytes_human(guaranteed, guar, sizeof(guar));
    snprintf(title, sizeof(title), "GPU %u  %s", g->index, g->name[0] ? g->name : g->uuid);
    fit(title, l->cols - 46);
    fprintf(l->out, "%-*s %10s / %-10s used  %s\n", l->cols - 46, title, used, total,
            gpu_mode(v, g));
    char line[256];
    snprintf(line, sizeof(line), "  %s  guaranteed %s, %d fraction%s", g->uuid, guar, n,
             n == 1 ? "" : "s");
    fit(line, l->cols);
    fprintf(l->out, "%s\n", line);
    heading(l);
    for (size_t i = 0; i < v->n; i++)
        for (size_t d = 0; d < v->f[i].n_devices; d++)
            if (strcmp(v->f[i].devices[d].uuid, g->uuid) == 0)
                fraction_row(l, v, &v->f[i], &v->f[i].devices[d], g);
    /* what uses the GPU outside any fraction: the driver sees it, gpufrac does not count it */
    for (size_t k = 0; k < v->n_procs && l->procs; k++) {
        bool ours = false;
        if (v->procs[k].gpu != g->index)
            continue;
        for (size_t i = 0; i < v->n && !ours; i++)
            for (size_t p = 0; p < v->f[i].n_pids && p < STATUS_PIDS_MAX; p++)
                ours = ours || v->f[i].pids[p] == v->procs[k].pid;
        if (!ours && v->all_users) {
            char name[64], mem[16];
            status_proc_name(v->procs[k].pid, name, sizeof(name));
            compact(v->procs[k].used, mem, sizeof(mem));
            fprintf(l->out, "  (no fraction) pid %-8d %-24.24s %6s (driver)\n",
                    (int)v->procs[k].pid, name, mem);
        }
    }
    if (!l->brief)
        fputc('\n', l->out);
}

enum { RECENT_EVENTS = 5 };

/* The agent's last few events (reclaims, watchdog kills, MPS faults): the
 * agent rotates events.log to events.log.1, so the newest are in either. */
static void print_events(const layout *l, const char *state)
{
    char path[GF_PATH_MAX + 16], lines[RECENT_EVENTS][512];
    int n = 0;
    FILE *fp;

    snprintf(path, sizeof(path), "%s/" GF_STATE_EVENTS_OLD, state);
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            snprintf(path, sizeof(path), "%s/" GF_STATE_EVENTS, state);
        if (!(fp = fopen(path, "re")))
            continue;
        while (fgets(lines[n % RECENT_EVENTS], sizeof(lines[0]), fp))
            n++;
        fclose(fp);
    }
    if (n == 0)
        return;
    char title[GF_PATH_MAX + 48];
    snprintf(title, sizeof(title), "Recent agent events (%s):", path);
    fit(title, l->cols);
    fprintf(l->out, "%s\n", title);
    for (int i = n > RECENT_EVENTS ? n - RECENT_EVENTS : 0; i < n; i++) {
        char *ln = lines[i % RECENT_EVENTS];
        ln[strcspn(ln, "\n")] = '\0';
        wrap_to(l->out, ln, l->cols, "  ", "      ");
    }
}

static void header(const layout *l, const status_view *v, const status_opts *o)
{
    char head[GF_PATH_MAX + 96];
    const char *served = v->agent ? "gpufracd serves it"
                                  : "no gpufracd serves it: nothing is guaranteed";

    if (o->title) {
        snprintf(head, sizeof(head), "%s", o->title);
        fit(head, l->cols);
        fprintf(l->out, "%s\n", head);
    }
    if (l->brief)
        snprintf(head, sizeof(head), "gpufrac status  %s  (%s%s)", v->state, served,
                 v->all_users ? "" : "; yours only");
    else
        snprintf(head, sizeof(head), "gpufrac status  %s", v->state);
    fit(head, l->cols);
    if (l->brief)
        fprintf(l->out, "%s\n", head);
    else
        fprintf(l->out, "%s\n%s%s\n", head, served, v->all_users ? "" : "; your fractions only");
}

/* The ended fractions not listed, in one line: how many, how they ended. */
static void ended_count(const layout *l, const status_view *v, const status_opts *o)
{
    int n = 0, evicted = 0, killed = 0;
    char line[320];

    for (size_t i = 0; i < v->n; i++) {
        const char *st = status_state_name(&v->f[i]);
        if (!v->f[i].ended)
            continue;
        n++;
        evicted += strcmp(st, "evicted") == 0;
        killed += strcmp(st, "killed") == 0;
    }
    if (n == 0 || l->show_ended)
        return;
    int k = snprintf(line, sizeof(line), "%d ended in the last %d min", n, GF_ENDED_KEEP_S / 60);
    if (evicted)
        k += snprintf(line + k, sizeof(line) - (size_t)k, ", %d evicted", evicted);
    if (killed)
        k += snprintf(line + k, sizeof(line) - (size_t)k, ", %d killed", killed);
    if (o->hint)
        snprintf(line + k, sizeof(line) - (size_t)k, ": %s", o->hint);
    fit(line, l->cols);
    fprintf(l->out, "%s\n", line);
}

static void render(const status_view *v, const status_opts *o, int level, FILE *out)
{
    layout l = plan(v, o, level, out);
    bool unknown = false;
    size_t live = 0;

    for (size_t i = 0; i < v->n; i++)
        live += !v->f[i].ended;
    header(&l, v, o);
    if (v->n == 0 || (live == 0 && !l.show_ended))
        fprintf(out, "No fractions running.\n");
    if (!l.brief)
        fputc('\n', out);
    for (size_t g = 0; g < v->gpus.n && v->have_gpus; g++)
        if (o->only_gpu < 0 || (int)v->gpus.gpus[g].index == o->only_gpu)
            gpu_block(&l, v, &v->gpus.gpus[g]);
    /* fractions on a GPU this host does not show (NVML gone, config from elsewhere) */
    for (size_t i = 0; i < v->n && o->only_gpu < 0; i++) {
        const status_fraction *f = &v->f[i];
        bool known = false;
        for (size_t d = 0; d < f->n_devices; d++)
            for (size_t g = 0; g < v->gpus.n && v->have_gpus; g++)
                known = known || strcmp(f->devices[d].uuid, v->gpus.gpus[g].uuid) == 0;
        if (known || (f->ended && !l.show_ended))
            continue;
        if (!unknown) {
            fprintf(out, "Not on a GPU NVML lists here\n");
            heading(&l);
            unknown = true;
        }
        fraction_row(&l, v, f, f->n_devices ? &f->devices[0] : NULL, NULL);
    }
    if (unknown && !l.brief)
        fputc('\n', out);
    ended_count(&l, v, o);
    if (l.events)
        print_events(&l, v->state);
}

static int count_lines(const char *s)
{
    int n = 0;

    for (; *s; s++)
        n += *s == '\n';
    return n;
}

/* The first rows - 1 lines, then one saying how many more there were. */
static void emit(const char *text, const status_opts *o, FILE *out)
{
    int lines = count_lines(text), keep = o->rows - 1;
    char more[200];

    if (!o->cut || o->rows <= 0 || lines <= o->rows) {
        fputs(text, out);
        return;
    }
    for (int i = 0; i < keep; i++) {
        const char *nl = strchr(text, '\n');
        fwrite(text, 1, (size_t)(nl - text) + 1, out);
        text = nl + 1;
    }
    snprintf(more, sizeof(more), "... %d more lines%s%s", lines - keep, o->hint ? ": " : "",
             o->hint ? o->hint : "");
    fit(more, o->cols);
    fprintf(out, "%s\n", more);
}

/* Names come from tenants (a process's comm, a pod's name, a reason quoting
 * them): no control byte of theirs reaches the terminal, only our newlines. */
static void defang(char *s)
{
    for (; *s; s++)
        if ((*s > 0 && *s < 0x20 && *s != '\n') || *s == 0x7f)
            *s = '?';
}

void status_print_table(const status_view *v, const status_opts *o, FILE *out)
{
    int last = o->cut ? 2 : 1;
    char *buf = NULL;
    size_t len = 0;

    for (int level = 0; level <= last; level++) {
        FILE *m;
        free(buf);
        buf = NULL;
        if (!(m = open_memstream(&buf, &len)))
            return; /* out of memory: nothing rather than what might not be defanged */
        render(v, o, level, m);
        if (fclose(m) != 0 || !buf) {
            free(buf);
            return;
        }
        defang(buf);
        if (o->rows <= 0 || count_lines(buf) <= o->rows)
            break;
    }
    emit(buf, o, out);
    free(buf);
}
