#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "quantity.h"
#include "status.h"

enum { COL_NAME, COL_STATE, COL_MODE, COL_DEVICES, COL_REQUEST, COL_LIMIT, COL_USED, COL_BURST,
       COL_DENIED, COL_EVICTED, COL_PIDS, N_COLS };

static const char *const headings[N_COLS] = {
    "NAME", "STATE", "MODE", "DEVICES", "REQUEST", "LIMIT", "USED", "BURST", "DENIED", "EVICTED",
    "PIDS"};
static const int right_aligned[N_COLS] = {[COL_REQUEST] = 1, [COL_LIMIT] = 1, [COL_USED] = 1,
                                          [COL_BURST] = 1,   [COL_DENIED] = 1, [COL_EVICTED] = 1};

typedef char cell[160];

enum { TABLE_PIDS = 8 }; /* the rest are counted; --json lists them */

static void cat_item(char *buf, size_t len, const char *item)
{
    size_t off = strlen(buf);
    if (off < len)
        snprintf(buf + off, len - off, "%s%s", off ? "," : "", item);
}

/* One size per device, or just one when they all agree. */
static void sizes(const status_fraction *f, size_t field, char *buf, size_t len)
{
    char h[32];
    bool same = true;

    buf[0] = '\0';
    for (size_t i = 0; i < f->n_devices; i++) {
        uint64_t v = field ? f->devices[i].limit : f->devices[i].request;
        uint64_t v0 = field ? f->devices[0].limit : f->devices[0].request;
        same = same && v == v0;
    }
    for (size_t i = 0; i < f->n_devices && (i == 0 || !same); i++) {
        gf_bytes_human(field ? f->devices[i].limit : f->devices[i].request, h, sizeof(h));
        cat_item(buf, len, h);
    }
}

static void fill_row(const status_fraction *f, cell *row)
{
    char item[32];

    snprintf(row[COL_NAME], sizeof(cell), "%s", f->name);
    snprintf(row[COL_STATE], sizeof(cell), "%s", f->readable ? gf_fraction_state_name(f->state)
                                                             : "unreadable");
    for (int c = COL_MODE; c < N_COLS; c++)
        snprintf(row[c], sizeof(cell), "-");
    if (!f->readable)
        return;
    if (f->mode == GF_MODE_SM_SHARING)
        snprintf(row[COL_MODE], sizeof(cell), "sm-sharing(%d%%)", f->compute_percent);
    else
        snprintf(row[COL_MODE], sizeof(cell), "%s", gf_mode_name(f->mode));
    row[COL_DEVICES][0] = '\0';
    for (size_t i = 0; i < f->n_devices; i++) {
        snprintf(item, sizeof(item), "%.12s", f->devices[i].uuid);
        cat_item(row[COL_DEVICES], sizeof(cell), item);
    }
    sizes(f, 0, row[COL_REQUEST], sizeof(cell));
    sizes(f, 1, row[COL_LIMIT], sizeof(cell));
    gf_bytes_human(f->used, row[COL_USED], sizeof(cell));
    gf_bytes_human(f->lent, row[COL_BURST], sizeof(cell));
    snprintf(row[COL_DENIED], sizeof(cell), "%llu", (unsigned long long)f->denied);
    snprintf(row[COL_EVICTED], sizeof(cell), "%llu", (unsigned long long)f->evictions);
    row[COL_PIDS][0] = '\0';
    for (size_t i = 0; i < f->n_pids && i < TABLE_PIDS; i++) {
        snprintf(item, sizeof(item), "%d", (int)f->pids[i]);
        cat_item(row[COL_PIDS], sizeof(cell), item);
    }
    if (f->n_pids > TABLE_PIDS) {
        snprintf(item, sizeof(item), "+%zu more", f->n_pids - TABLE_PIDS);
        cat_item(row[COL_PIDS], sizeof(cell), item);
    }
    if (f->n_pids == 0)
        snprintf(row[COL_PIDS], sizeof(cell), "-");
}

static void print_row(cell *row, const int *width)
{
    for (int c = 0; c < N_COLS; c++) {
        const char *sep = c + 1 < N_COLS ? "  " : "\n";
        if (c + 1 == N_COLS)
            printf("%s%s", row[c], sep);
        else
            printf(right_aligned[c] ? "%*s%s" : "%-*s%s", width[c], row[c], sep);
    }
}

enum { RECENT_EVENTS = 5 };

/* The agent's last few events (reclaims, watchdog kills, MPS faults): they
 * often concern fractions that are gone by now. */
static void print_events(const char *state)
{
    char path[GF_PATH_MAX + 16], lines[RECENT_EVENTS][512];
    int n = 0;
    FILE *fp;

    snprintf(path, sizeof(path), "%s/events.log", state);
    if (!(fp = fopen(path, "re")))
        return;
    while (fgets(lines[n % RECENT_EVENTS], sizeof(lines[0]), fp))
        n++;
    fclose(fp);
    if (n == 0)
        return;
    printf("\nRecent agent events (%s):\n", path);
    for (int i = n > RECENT_EVENTS ? n - RECENT_EVENTS : 0; i < n; i++)
        printf("  %s", lines[i % RECENT_EVENTS]);
}

static void print_fractions(const status_fraction *f, size_t n, const char *state);

void status_print_table(const status_fraction *f, size_t n, const char *state)
{
    print_fractions(f, n, state);
    print_events(state);
}

static void print_fractions(const status_fraction *f, size_t n, const char *state)
{
    int width[N_COLS];
    cell head[N_COLS];
    cell(*all)[N_COLS];

    if (n == 0) {
        printf("No fractions running (state directory %s).\n", state);
        return;
    }
    all = calloc(n, sizeof(*all));
    if (!all)
        return;
    for (int c = 0; c < N_COLS; c++) {
        snprintf(head[c], sizeof(cell), "%s", headings[c]);
        width[c] = (int)strlen(headings[c]);
    }
    for (size_t i = 0; i < n; i++) {
        fill_row(&f[i], all[i]);
        for (int c = 0; c < N_COLS; c++)
            if ((int)strlen(all[i][c]) > width[c])
                width[c] = (int)strlen(all[i][c]);
    }
    print_row(head, width);
    for (size_t i = 0; i < n; i++)
        print_row(all[i], width);
    for (size_t i = 0; i < n; i++)
        if (!f[i].readable)
            fprintf(stderr, "gpufrac status: %s: %s\n", f[i].name, f[i].error);
    free(all);
}
