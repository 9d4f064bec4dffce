/* SPDX-License-Identifier: Apache-2.0 */
/* gpufrac install docker|podman: the "gpufrac" runtime entry in
 * <root>/etc/docker/daemon.json ("runtimes") or <root>/etc/containers/
 * containers.conf ([engine.runtimes]). Invariants: a run that changes
 * nothing writes nothing (idempotent); a file that cannot be read as its
 * engine reads it is refused and left as it was; a write is a temp file
 * renamed over the old one, its mode kept; --dry-run writes nothing. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "cli.h"
#include "config.h"
#include "install.h"
#include "replace.h"

#define FILE_MAX (1u << 20)
#define STMTS_MAX 4096

static const char install_help[] =
    "Usage: gpufrac install docker|podman [--root DIR] [--dry-run] [--runtime PATH]\n"
    "                       [--real-runtime NAME] [--name NAME]\n"
    "\n"
    "Adds gpufrac-runtime as a runtime of Docker (\"runtimes\" in /etc/docker/daemon.json)\n"
    "or Podman ([engine.runtimes] in /etc/containers/containers.conf). Running it again\n"
    "changes nothing; a file that cannot be read is refused and left as it was.\n"
    "\n"
    "Flags:\n"
    "  --root DIR           edit the files under DIR instead of / (a node image, a test)\n"
    "  --dry-run            print the file it would write, write nothing\n"
    "  --runtime PATH       the gpufrac-runtime the entry names (default: the one\n"
    "                       installed with this gpufrac)\n"
    "  --real-runtime NAME  podman: the runtime gpufrac-runtime wraps, runc or crun\n"
    "                       (default: containers.conf's runtime, else crun when installed)\n"
    "  --name NAME          the runtime's name in the engine (default gpufrac)\n"
    "\n"
    "Then: docker run --runtime gpufrac -e GPUFRAC_GPU_MEMORY_REQUEST=2Gi ...\n"
    "      podman run --runtime gpufrac --annotation gpu-fraction=0.5 ...\n";

typedef struct install_opts {
    const char *engine, *root, *runtime, *real, *name;
    bool dry_run;
} install_opts;

static int parse(int argc, char **argv, install_opts *o, bool *help)
{
    *help = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = strcmp(a, "--root") == 0           ? &o->root
                            : strcmp(a, "--runtime") == 0      ? &o->runtime
                            : strcmp(a, "--real-runtime") == 0 ? &o->real
                            : strcmp(a, "--name") == 0         ? &o->name
                                                               : NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
            return *help = true, 0;
        if (strcmp(a, "--dry-run") == 0)
            o->dry_run = true;
        else if (slot && i + 1 < argc)
            *slot = argv[++i];
        else if (slot)
            return gf_cli_usage_error("install", "%s needs a value", a);
        else if (a[0] == '-')
            return gf_cli_usage_error("install", "unknown flag %s", a);
        else if (!o->engine)
            o->engine = a;
        else
            return gf_cli_usage_error("install", "unexpected argument %s", a);
    }
    if (!o->engine || (strcmp(o->engine, "docker") != 0 && strcmp(o->engine, "podman") != 0))
        return gf_cli_usage_error("install", "expected the engine: docker or podman, got %s",
                                  o->engine ? o->engine : "nothing");
    return 0;
}

/* What a TOML basic string and a JSON string hold without escapes. */
static bool plain(const char *s, bool path)
{
    if (!*s || (path && s[0] != '/'))
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              strchr(path ? "/._+-" : "_-", *s)))
            return false;
    return true;
}

/* snprintf that refuses to cut: a path cut short would name another file. */
__attribute__((format(printf, 5, 6))) static int fmt_into(char *out, size_t len, gf_error *err,
                                                          const char *what, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    int n = vsnprintf(out, len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= len)
        return gf_error_set(err, GF_ERANGE, "%s is too long (at most %zu bytes)", what, len - 1);
    return 0;
}

/* The gpufrac-runtime next to this gpufrac (the build tree), else the
 * installed one (<prefix>/sbin). */
static int default_runtime(char *out, size_t len, gf_error *err)
{
    char dir[GF_PATH_MAX];

    if (gf_exe_dir(dir, sizeof(dir), err) < 0)
        return -1;
    if (fmt_into(out, len, err, "the runtime's path", "%s/gpufrac-runtime", dir) < 0)
        return -1;
    if (access(out, X_OK) == 0)
        return 0;
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    return fmt_into(out, len, err, "the runtime's path", "%s/sbin/gpufrac-runtime", dir);
}

/* The file, or *text NULL when it does not exist. */
static int read_file(const char *path, char **text, size_t *len, gf_error *err)
{
    struct stat st;
    gf_cleanup_close int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    ssize_t n;

    *text = NULL;
    *len = 0;
    if (fd < 0 && errno == ENOENT)
        return 0;
    if (fd < 0)
        return gf_error_sys(err, "%s cannot be opened", path);
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return gf_error_set(err, GF_EINVAL, "%s is not a regular file; not changed", path);
    if ((unsigned long long)st.st_size > FILE_MAX)
        return gf_error_set(err, GF_ERANGE, "%s is larger than %u KiB; not changed", path,
                            FILE_MAX >> 10);
    if (!(*text = calloc(1, (size_t)st.st_size + 1)))
        return gf_error_sys(err, "allocating");
    n = read(fd, *text, (size_t)st.st_size);
    if (n < 0)
        return gf_error_sys(err, "reading %s", path);
    *len = (size_t)n;
    if (memchr(*text, '\0', *len))
        return gf_error_set(err, GF_EINVAL, "%s holds a NUL byte; not changed", path);
    return 0;
}

static int write_file(const char *path, const char *text, gf_error *err)
{
    char dirs[GF_PATH_MAX + 16];
    char *slash;

    if (fmt_into(dirs, sizeof(dirs), err, "the file's path", "%s", path) < 0)
        return -1;
    if ((slash = strrchr(dirs, '/')) && slash != dirs) {
        *slash = '\0';
        if (gf_mkdir_p(dirs, 0755, err) < 0)
            return -1;
    }
    return gf_file_replace(path, text, strlen(text), GF_REPLACE_KEEP_MODE, err);
}

/* daemon.json with runtimes.<name>.path set; the entry's other keys and
 * every other key kept, in their order. */
static char *docker_edit(const install_opts *o, const char *path, const char *text,
                         const char *runtime, gf_error *err)
{
    json_error_t je;
    json_t *root, *rts, *entry;
    char *out;

    root = text && strspn(text, " \t\r\n") != strlen(text)
               ? json_loads(text, JSON_REJECT_DUPLICATES, &je)
               : json_object();
    if (!root) {
        gf_error_set(err, GF_EINVAL,
                     "%s is not JSON dockerd can read: %s (line %d); not changed, fix it first",
                     path, je.text, je.line);
        return NULL;
    }
    rts = json_object_get(root, "runtimes");
    entry = rts ? json_object_get(rts, o->name) : NULL;
    if (!json_is_object(root) || (rts && !json_is_object(rts)) ||
        (entry && !json_is_object(entry))) {
        gf_error_set(err, GF_EINVAL,
                     "%s: %s is not an object as dockerd expects (\"runtimes\": {\"%s\": "
                     "{\"path\": ...}}); not changed, fix it first",
                     path,
                     !json_is_object(root)  ? "the document"
                     : !json_is_object(rts) ? "\"runtimes\""
                                            : o->name,
                     o->name);
        json_decref(root);
        return NULL;
    }
    if (!rts)
        json_object_set_new(root, "runtimes", rts = json_object());
    if (!entry)
        json_object_set_new(rts, o->name, entry = json_object());
    json_object_set_new(entry, "path", json_string(runtime));
    out = json_dumps(root, JSON_INDENT(4) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!out)
        gf_error_set(err, GF_ENOSPACE, "formatting %s", path);
    return out;
}

/* The raw value of [engine] runtime, unquoted, or "". */
static void podman_default(const char *text, const toml_stmt *st, size_t n, char *out, size_t len)
{
    out[0] = '\0';
    for (size_t i = 0; i < n; i++)
        if (!st[i].is_header && strcmp(st[i].table, "engine") == 0 &&
            strcmp(st[i].key, "runtime") == 0) {
            const char *v = text + st[i].value_at;
            size_t vl = st[i].end - st[i].value_at;
            while (vl && (*v == ' ' || *v == '"' || *v == '\''))
                v++, vl--;
            while (vl && strchr(" \t\r\"'", v[vl - 1]))
                vl--;
            if (!memchr(v, '#', vl))
                snprintf(out, len, "%.*s", (int)vl, v);
        }
}

static int real_runtime(const install_opts *o, const char *text, const toml_stmt *st, size_t n,
                        char *out, size_t len, gf_error *err)
{
    if (o->real)
        snprintf(out, len, "%s", o->real);
    else
        podman_default(text ? text : "", st, n, out, len);
    if (!out[0]) /* Podman 4's default: crun where it is installed */
        snprintf(out, len, "%s",
                 access("/usr/bin/crun", X_OK) == 0 || access("/usr/local/bin/crun", X_OK) == 0
                     ? "crun"
                     : "runc");
    if (strcmp(out, "runc") != 0 && strcmp(out, "crun") != 0)
        return gf_error_set(err, GF_EINVAL,
                            "real runtime \"%s\": gpufrac-runtime wraps runc or crun (give "
                            "--real-runtime runc or crun)",
                            out);
    return 0;
}

static char *text_splice(const char *text, size_t len, size_t at, size_t cut, const char *ins)
{
    size_t il = strlen(ins);
    char *out = malloc(len - cut + il + 1);

    if (!out)
        return NULL;
    memcpy(out, text, at);
    memcpy(out + at, ins, il);
    memcpy(out + at + il, text + at + cut, len - at - cut);
    out[len - cut + il] = '\0';
    return out;
}

/* containers.conf with [engine.runtimes] <name> = ["<runtime>"]. */
static char *podman_edit(const install_opts *o, const char *path, const char *text, size_t len,
                         char *runtime, size_t rlen, gf_error *err)
{
    gf_cleanup_free toml_stmt *st = calloc(STMTS_MAX, sizeof(*st));
    const toml_stmt *hdr = NULL, *key = NULL;
    char line[GF_PATH_MAX + 160], real[16], wrapper[GF_PATH_MAX];
    size_t n = 0;

    if (!st)
        return gf_error_sys(err, "allocating"), NULL;
    if (text && toml_scan(text, len, st, STMTS_MAX, &n, err) < 0) {
        gf_error_wrap(err, "%s is not TOML podman can read; not changed, fix it first", path);
        return NULL;
    }
    if (real_runtime(o, text, st, n, real, sizeof(real), err) < 0)
        return NULL;
    if (fmt_into(wrapper, sizeof(wrapper), err, "--runtime", "%s-%s", runtime, real) < 0 ||
        fmt_into(runtime, rlen, err, "--runtime", "%s", wrapper) < 0)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (st[i].is_header && strcmp(st[i].table, "engine.runtimes") == 0)
            hdr = &st[i];
        else if (!st[i].is_header && strcmp(st[i].table, "engine.runtimes") == 0 &&
                 strcmp(st[i].key, o->name) == 0)
            key = &st[i];
        else if (!st[i].is_header &&
                 ((strcmp(st[i].table, "engine") == 0 && strncmp(st[i].key, "runtimes", 8) == 0) ||
                  strncmp(st[i].key, "engine.", 7) == 0)) {
            gf_error_set(err, GF_EINVAL,
                         "%s line %d sets the runtimes with a dotted key or an inline table "
                         "(%s); gpufrac edits only an [engine.runtimes] table; not changed",
                         path, st[i].line, st[i].key);
            return NULL;
        }
    }
    if (fmt_into(line, sizeof(line), err, "--name and --runtime", "%s = [\"%s\"]", o->name,
                 runtime) < 0)
        return NULL;
    if (key)
        return text_splice(text, len, key->start, key->end - key->start, line);
    if (hdr) {
        char ins[sizeof(line) + 2];
        snprintf(ins, sizeof(ins), "\n%s", line);
        return text_splice(text, len, hdr->end, 0, ins);
    }
    char tail[sizeof(line) + 64];
    snprintf(tail, sizeof(tail), "%s%s[engine.runtimes]\n%s\n",
             len && text[len - 1] != '\n' ? "\n" : "", len ? "\n" : "", line);
    return text_splice(text ? text : "", len, len, 0, tail);
}

static int install(const install_opts *o, gf_error *err)
{
    bool docker = strcmp(o->engine, "docker") == 0;
    char path[GF_PATH_MAX], runtime[GF_PATH_MAX];
    gf_cleanup_free char *text = NULL;
    gf_cleanup_free char *out = NULL;
    size_t len;

    if (o->runtime ? fmt_into(runtime, sizeof(runtime), err, "--runtime", "%s", o->runtime) < 0
                   : default_runtime(runtime, sizeof(runtime), err) < 0)
        return -1;
    if (!plain(o->name, false))
        return gf_error_set(err, GF_EINVAL, "--name \"%s\": expected letters, digits, _ and -",
                            o->name);
    if (!plain(runtime, true))
        return gf_error_set(err, GF_EINVAL,
                            "--runtime \"%s\": expected an absolute path of letters, digits "
                            "and /._+-",
                            runtime);
    if (fmt_into(path, sizeof(path), err, "--root", "%s%s",
                 strcmp(o->root, "/") == 0 ? "" : o->root,
                 docker ? "/etc/docker/daemon.json" : "/etc/containers/containers.conf") < 0)
        return -1;
    if (read_file(path, &text, &len, err) < 0)
        return -1;
    out = docker ? docker_edit(o, path, text, runtime, err)
                 : podman_edit(o, path, text, len, runtime, sizeof(runtime), err);
    if (!out)
        return -1;
    if (docker && out[0] && out[strlen(out) - 1] != '\n') {
        char *nl = realloc(out, strlen(out) + 2);
        if (!nl)
            return gf_error_sys(err, "allocating");
        strcat(out = nl, "\n");
    }
    if (text && strcmp(text, out) == 0) {
        printf("%s: runtime %s already runs %s; nothing changed\n", path, o->name, runtime);
        return 0;
    }
    if (o->dry_run) {
        printf("would write %s (runtime %s: %s):\n%s", path, o->name, runtime, out);
        return 0;
    }
    if (write_file(path, out, err) < 0)
        return -1;
    printf("%s: runtime %s runs %s\n%s\n", path, o->name, runtime,
           docker ? "dockerd reads it at start or on SIGHUP (systemctl reload docker)"
                  : "podman reads it at every command");
    return 0;
}

int gf_cmd_install(int argc, char **argv)
{
    install_opts o = {.root = "/", .name = "gpufrac"};
    gf_error err = {0};
    bool help;
    int rc = parse(argc, argv, &o, &help);

    if (help)
        return fputs(install_help, stdout), GF_EXIT_OK;
    if (rc != 0)
        return rc;
    return install(&o, &err) < 0 ? gf_cli_fail("install", GF_EXIT_FAIL, &err) : GF_EXIT_OK;
}
