/* Agent-wide counters outlive the fractions they counted, and restarts:
 * <state>/counters holds them as key=value lines, replaced atomically. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"

static void counters_path(const gf_agent *a, char *buf, size_t len)
{
    snprintf(buf, len, "%s/counters", a->state_dir);
}

void gf_counters_load(gf_agent *a)
{
    char path[GF_PATH_MAX + 16], key[64];
    unsigned long long v;
    FILE *fp;

    counters_path(a, path, sizeof(path));
    if (!(fp = fopen(path, "re")))
        return;
    while (fscanf(fp, "%63[a-z_]=%llu\n", key, &v) == 2) {
        if (strcmp(key, "evictions_total") == 0)
            a->evictions_total = v;
        else if (strcmp(key, "watchdog_kills_total") == 0)
            a->watchdog_kills_total = v;
    }
    fclose(fp);
}

void gf_counters_save(gf_agent *a)
{
    char path[GF_PATH_MAX + 16], tmp[GF_PATH_MAX + 32];
    FILE *fp;

    counters_path(a, path, sizeof(path));
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    if (!(fp = fopen(tmp, "we")))
        return;
    fprintf(fp, "evictions_total=%llu\nwatchdog_kills_total=%llu\n",
            (unsigned long long)a->evictions_total, (unsigned long long)a->watchdog_kills_total);
    if (fclose(fp) == 0)
        rename(tmp, path);
    else
        unlink(tmp);
}
