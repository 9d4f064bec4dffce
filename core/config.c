/* SPDX-License-Identifier: Apache-2.0 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "number.h"
#include "quantity.h"

#define LINE_VALUE_MAX GF_PATH_MAX

enum { K_VERSION, K_NAME, K_LEDGER, K_MODE, K_COMPUTE, K_AGENT, K_DEVICE, K_COUNT };

static const char *const config_keys[K_COUNT] = {"version",         "name",  "ledger", "mode",
                                                 "compute_percent", "agent", "device"};

int gf_name_valid(const char *name)
{
    size_t i;

    if (name == NULL || name[0] == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return 0;
    for (i = 0; name[i] != '\0'; i++) {
        char c = name[i];

        if (i >= GF_NAME_MAX - 1)
            return 0;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return 0;
    }
    return 1;
}

static int parse_device(const char *v, gf_fraction_config *cfg, unsigned line, gf_error *err)
{
    char q[GF_QUOTE_MAX], num[32];
    gf_config_device *d;
    const char *c1 = strchr(v, ','), *c2;
    size_t i;

    if (cfg->n_devices >= GF_CONFIG_DEVICES_MAX)
        return gf_error_set(err, GF_ENOSPACE,
                            "config line %u: key \"device\": more than %d devices", line,
                            GF_CONFIG_DEVICES_MAX);
    d = &cfg->devices[cfg->n_devices];
    c2 = c1 != NULL ? strchr(c1 + 1, ',') : NULL;
    if (c1 == NULL || c2 == NULL || c1 == v || (size_t)(c1 - v) >= GF_UUID_MAX ||
        (size_t)(c2 - c1 - 1) >= sizeof(num))
        goto bad;
    memcpy(d->uuid, v, (size_t)(c1 - v));
    d->uuid[c1 - v] = '\0';
    memcpy(num, c1 + 1, (size_t)(c2 - c1 - 1));
    num[c2 - c1 - 1] = '\0';
    if (strpbrk(d->uuid, " \t") != NULL || gf_parse_udec(num, INT64_MAX, &d->request) < 0 ||
        gf_parse_udec(c2 + 1, INT64_MAX, &d->limit) < 0)
        goto bad;
    if (d->request == 0)
        return gf_error_set(err, GF_ERANGE,
                            "config line %u: key \"device\": request is 0 in \"%s\"", line,
                            gf_quote(v, q, sizeof(q)));
    if (d->limit < d->request)
        return gf_error_set(err, GF_ERANGE,
                            "config line %u: key \"device\": limit is smaller than request in "
                            "\"%s\"",
                            line, gf_quote(v, q, sizeof(q)));
    for (i = 0; i < cfg->n_devices; i++) {
        if (strcmp(cfg->devices[i].uuid, d->uuid) == 0)
            return gf_error_set(err, GF_EINVAL,
                                "config line %u: key \"device\": duplicate device %s", line,
                                gf_quote(d->uuid, q, sizeof(q)));
    }
    cfg->n_devices++;
    return 0;
bad:
    return gf_error_set(err, GF_EINVAL,
                        "config line %u: key \"device\": \"%s\" is not <uuid or *>,<request "
                        "bytes>,<limit bytes>",
                        line, gf_quote(v, q, sizeof(q)));
}

static int parse_value(int key, const char *v, gf_fraction_config *cfg, unsigned line,
                       gf_error *err)
{
    char q[GF_QUOTE_MAX], what[48];
    uint64_t n;

    switch (key) {
    case K_VERSION:
        if (gf_parse_udec(v, UINT32_MAX, &n) < 0 || n != GF_CONFIG_VERSION)
            return gf_error_set(err, GF_EINVAL,
                                "config line %u: key \"version\": \"%s\" is not supported "
                                "(expected %d)",
                                line, gf_quote(v, q, sizeof(q)), GF_CONFIG_VERSION);
        cfg->version = (unsigned)n;
        return 0;
    case K_NAME:
        if (!gf_name_valid(v))
            return gf_error_set(err, GF_EINVAL,
                                "config line %u: key \"name\": \"%s\" is not a valid name "
                                "(expected 1-63 of A-Z a-z 0-9 _ . -)",
                                line, gf_quote(v, q, sizeof(q)));
        strcpy(cfg->name, v);
        return 0;
    case K_LEDGER:
        if (v[0] != '/' || strlen(v) >= GF_PATH_MAX)
            return gf_error_set(err, GF_EINVAL,
                                "config line %u: key \"ledger\": \"%s\" is not an absolute path",
                                line, gf_quote(v, q, sizeof(q)));
        strcpy(cfg->ledger, v);
        return 0;
    case K_AGENT:
        if (v[0] != '/' || strlen(v) >= GF_PATH_MAX)
            return gf_error_set(err, GF_EINVAL,
                                "config line %u: key \"agent\": \"%s\" is not an absolute path",
                                line, gf_quote(v, q, sizeof(q)));
        strcpy(cfg->agent, v);
        return 0;
    case K_MODE:
        snprintf(what, sizeof(what), "config line %u: key \"mode\"", line);
        return gf_mode_parse(v, what, &cfg->mode, err);
    case K_COMPUTE:
        if (gf_parse_udec(v, 100, &n) < 0 || n == 0)
            return gf_error_set(err, GF_EINVAL,
                                "config line %u: key \"compute_percent\": \"%s\" is not an "
                                "integer from 1 to 100",
                                line, gf_quote(v, q, sizeof(q)));
        cfg->compute_percent = (int)n;
        return 0;
    default: return parse_device(v, cfg, line, err);
    }
}

static int parse_line(const char *p, size_t n, gf_fraction_config *cfg, unsigned line,
                      unsigned *seen, gf_error *err)
{
    char q[GF_QUOTE_MAX], value[LINE_VALUE_MAX];
    const char *eq = memchr(p, '=', n);
    size_t klen, vlen, i;
    int key;

    for (i = 0; i < n; i++) {
        if ((unsigned char)p[i] < 0x20 && p[i] != '\t')
            return gf_error_set(err, GF_EINVAL, "config line %u: contains a control character",
                                line);
    }
    if (eq == NULL)
        return gf_error_set(err, GF_EINVAL, "config line %u: expected key=value", line);
    klen = (size_t)(eq - p);
    vlen = n - klen - 1;
    for (key = 0; key < K_COUNT; key++) {
        if (strlen(config_keys[key]) == klen && memcmp(config_keys[key], p, klen) == 0)
            break;
    }
    if (key == K_COUNT) {
        memcpy(value, p, klen < sizeof(value) ? klen : sizeof(value) - 1);
        value[klen < sizeof(value) ? klen : sizeof(value) - 1] = '\0';
        return gf_error_set(err, GF_EINVAL,
                            "config line %u: unknown key \"%s\" (expected version, name, ledger, "
                            "mode, compute_percent, agent or device)",
                            line, gf_quote(value, q, sizeof(q)));
    }
    if (key != K_DEVICE && (*seen & (1u << key)))
        return gf_error_set(err, GF_EINVAL, "config line %u: duplicate key \"%s\"", line,
                            config_keys[key]);
    *seen |= 1u << key;
    if (vlen >= sizeof(value))
        return gf_error_set(err, GF_EINVAL, "config line %u: key \"%s\": value too long", line,
                            config_keys[key]);
    memcpy(value, eq + 1, vlen);
    value[vlen] = '\0';
    return parse_value(key, value, cfg, line, err);
}

int gf_config_parse(const char *text, size_t len, gf_fraction_config *out, gf_error *err)
{
    static const int required[] = {K_VERSION, K_NAME, K_LEDGER, K_DEVICE};
    gf_fraction_config cfg;
    unsigned seen = 0, line = 0;
    size_t pos = 0, i;

    memset(&cfg, 0, sizeof(cfg));
    cfg.mode = GF_MODE_TIME_SLICING;
    cfg.compute_percent = 100;
    while (pos < len) {
        const char *p = text + pos;
        const char *nl = memchr(p, '\n', len - pos);
        size_t n = nl != NULL ? (size_t)(nl - p) : len - pos;

        pos += n + (nl != NULL);
        line++;
        if (n == 0 || p[0] == '#')
            continue;
        if (parse_line(p, n, &cfg, line, &seen, err) < 0)
            return -1;
    }
    for (i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
        if (!(seen & (1u << required[i])))
            return gf_error_set(err, GF_EINVAL, "config: missing required key \"%s\"",
                                config_keys[required[i]]);
    }
    memcpy(out, &cfg, sizeof(cfg)); /* padding too: configs compare bytewise */
    return 0;
}

int gf_config_format(const gf_fraction_config *cfg, char *buf, size_t len)
{
    size_t used = 0, i;
    int n;

    n = snprintf(buf, len,
                 "# gpufrac fraction config\nversion=%u\nname=%s\nledger=%s\nmode=%s\n"
                 "compute_percent=%d\n",
                 cfg->version, cfg->name, cfg->ledger, gf_mode_name(cfg->mode),
                 cfg->compute_percent);
    if (n < 0 || (size_t)n >= len)
        return -1;
    used = (size_t)n;
    if (cfg->agent[0]) {
        n = snprintf(buf + used, len - used, "agent=%s\n", cfg->agent);
        if (n < 0 || (size_t)n >= len - used)
            return -1;
        used += (size_t)n;
    }
    for (i = 0; i < cfg->n_devices && i < GF_CONFIG_DEVICES_MAX; i++) {
        const gf_config_device *d = &cfg->devices[i];

        n = snprintf(buf + used, len - used, "device=%s,%" PRIu64 ",%" PRIu64 "\n", d->uuid,
                     d->request, d->limit);
        if (n < 0 || (size_t)n >= len - used)
            return -1;
        used += (size_t)n;
    }
    return (int)used;
}

const gf_config_device *gf_config_find_device(const gf_fraction_config *cfg, const char *uuid)
{
    const gf_config_device *any = NULL;
    size_t i;

    for (i = 0; i < cfg->n_devices && i < GF_CONFIG_DEVICES_MAX; i++) {
        if (uuid != NULL && strcmp(cfg->devices[i].uuid, uuid) == 0)
            return &cfg->devices[i];
        if (any == NULL && strcmp(cfg->devices[i].uuid, "*") == 0)
            any = &cfg->devices[i];
    }
    return any;
}

int gf_config_load(const char *path, gf_fraction_config *out, gf_error *err)
{
    char text[GF_CONFIG_TEXT_MAX + 1];
    size_t len = 0;
    ssize_t n;
    int fd;

    fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return gf_error_sys(err, "opening fraction config %s", path);
    while (len < sizeof(text)) {
        n = read(fd, text + len, sizeof(text) - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            gf_error_sys(err, "reading fraction config %s", path);
            goto fail;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    if (len > GF_CONFIG_TEXT_MAX)
        return gf_error_set(err, GF_ERANGE, "fraction config %s is larger than %d bytes", path,
                            GF_CONFIG_TEXT_MAX);
    if (gf_config_parse(text, len, out, err) < 0)
        return gf_error_wrap(err, "fraction config %s", path);
    return 0;
fail:
    close(fd);
    return -1;
}
