/* Container fractions, made by the agent for the OCI runtime wrapper:
 * admit (check and create), attach (the container's init process), release
 * (remove), and reconcile (remove what a missed poststop hook left). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "admit.h"
#include "quantity.h"

static int write_file(const char *dir, const char *name, const char *text, mode_t mode,
                      gf_error *err)
{
    char path[GF_PATH_MAX + 64];
    int fd;
    size_t len = strlen(text);

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return gf_error_sys(err, "creating %s", path);
    if (write(fd, text, len) != (ssize_t)len) {
        gf_error_sys(err, "writing %s", path);
        close(fd);
        return -1;
    }
    fchmod(fd, mode);
    close(fd);
    return 0;
}

static void rm_tree(const char *dir)
{
    char path[GF_PATH_MAX + 300];
    struct dirent *de;
    DIR *d = opendir(dir);

    while (d && (de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        unlink(path);
    }
    if (d)
        closedir(d);
    rmdir(dir);
}

/* "uuid/request/limit,..." into cfg->devices. */
static int parse_devices(const char *v, gf_fraction_config *cfg, gf_error *err)
{
    char buf[GF_PROTO_VAL_MAX], *save = NULL, *item;

    snprintf(buf, sizeof(buf), "%s", v ? v : "");
    for (item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        gf_config_device *d = &cfg->devices[cfg->n_devices];
        char *s1 = strchr(item, '/'), *s2 = s1 ? strchr(s1 + 1, '/') : NULL, *end;
        if (cfg->n_devices == GF_CONFIG_DEVICES_MAX || !s1 || !s2 || s1 - item >= GF_UUID_MAX)
            return gf_error_set(err, GF_EINVAL,
                                "devices: \"%s\" is not uuid/request/limit (bytes)", item);
        memcpy(d->uuid, item, (size_t)(s1 - item));
        d->uuid[s1 - item] = '\0';
        d->request = strtoull(s1 + 1, &end, 10);
        if (end != s2 || !d->request)
            return gf_error_set(err, GF_EINVAL, "devices: bad request in \"%s\"", item);
        d->limit = strtoull(s2 + 1, &end, 10);
        if (*end || d->limit < d->request)
            return gf_error_set(err, GF_EINVAL, "devices: bad limit in \"%s\"", item);
        cfg->n_devices++;
    }
    if (!cfg->n_devices)
        return gf_error_set(err, GF_EINVAL, "devices= names no device");
    return 0;
}

int gf_admit_parse(const gf_msg *in, gf_fraction_config *cfg, gf_error *err)
{
    const char *name = gf_msg_get(in, "name"), *mode = gf_msg_get(in, "mode");
    uint64_t pct = 100;

    memset(cfg, 0, sizeof(*cfg));
    cfg->version = GF_CONFIG_VERSION;
    if (!gf_name_valid(name))
        return gf_error_set(err, GF_EINVAL, "name=%s is not a valid fraction name",
                            name ? name : "(missing)");
    snprintf(cfg->name, sizeof(cfg->name), "%s", name);
    if (mode && gf_mode_parse(mode, "mode", &cfg->mode, err) < 0)
        return -1;
    if (gf_msg_get(in, "compute") && (gf_msg_get_u64(in, "compute", &pct, err) < 0 || !pct ||
                                      pct > 100))
        return gf_error_set(err, GF_EINVAL, "compute= must be a percentage from 1 to 100");
    cfg->compute_percent = (int)pct;
    return parse_devices(gf_msg_get(in, "devices"), cfg, err);
}

/* Guarantees must fit each GPU; modes never share one. */
int gf_admit_check_fit(gf_agent *a, const gf_fraction_config *cfg, gf_error *err)
{
    char h1[32], h2[32];
    for (size_t i = 0; i < cfg->n_devices; i++) {
        const gf_config_device *d = &cfg->devices[i];
        int g = gf_gpu_index(a, d->uuid);
        if (g < 0)
            return gf_error_set(err, GF_ENOTFOUND, "%s is not a GPU of this node", d->uuid);
        gf_gpu *gpu = &a->gpus[g];
        if (gpu->n_fractions && gpu->mode != cfg->mode)
            return gf_error_set(err, GF_ESTATE, "GPU %s runs %s fractions; a %s fraction cannot "
                                "share it", d->uuid, gf_mode_name(gpu->mode),
                                gf_mode_name(cfg->mode));
        if (gpu->guaranteed + d->request > gpu->total) {
            gf_bytes_human(gpu->total > gpu->guaranteed ? gpu->total - gpu->guaranteed : 0, h1,
                           sizeof(h1));
            gf_bytes_human(d->request, h2, sizeof(h2));
            return gf_error_set(err, GF_ESTATE, "GPU %s has %s not guaranteed to other "
                                "fractions; the container requests %s", d->uuid, h1, h2);
        }
    }
    return 0;
}

static int make_fraction(gf_agent *a, gf_fraction_config *cfg, const gf_msg *in, gf_error *err)
{
    char tmp[GF_PATH_MAX + 96], dir[GF_PATH_MAX + 96], text[GF_CONFIG_TEXT_MAX], id[512];
    uint64_t uid = 0;

    snprintf(dir, sizeof(dir), "%s/fractions/%s", a->state_dir, cfg->name);
    snprintf(tmp, sizeof(tmp), "%s/fractions/.new-%s", a->state_dir, cfg->name);
    if ((size_t)snprintf(cfg->ledger, sizeof(cfg->ledger), "%s/ledger", dir) >= sizeof(cfg->ledger))
        return gf_error_set(err, GF_EINVAL, "state directory path too long");
    if ((size_t)snprintf(cfg->agent, sizeof(cfg->agent), "%s/agent.sock", dir) >= sizeof(cfg->agent))
        return gf_error_set(err, GF_EINVAL, "state directory path too long");
    rm_tree(tmp);
    if (mkdir(tmp, 0711) < 0)
        return gf_error_sys(err, "creating %s", tmp);
    if (gf_config_format(cfg, text, sizeof(text)) < 0 ||
        write_file(tmp, "config", text, 0444, err) < 0)
        goto fail;
    snprintf(id, sizeof(id), "namespace=%s\npod=%s\ncontainer=%s\nadmitted=%lld\n",
             gf_msg_get(in, "ns") ? gf_msg_get(in, "ns") : "",
             gf_msg_get(in, "pod") ? gf_msg_get(in, "pod") : "",
             gf_msg_get(in, "container") ? gf_msg_get(in, "container") : "", (long long)time(NULL));
    char ledger_tmp[GF_PATH_MAX + 128];
    snprintf(ledger_tmp, sizeof(ledger_tmp), "%s/ledger", tmp);
    if (write_file(tmp, "identity", id, 0444, err) < 0 ||
        gf_ledger_create_for(ledger_tmp, cfg, 0600, err) < 0)
        goto fail;
    /* the fraction is given to the container's user: its ledger, nobody else's */
    if (gf_msg_get(in, "uid") && gf_msg_get_u64(in, "uid", &uid, err) == 0 &&
        chown(ledger_tmp, (uid_t)uid, (gid_t)-1) < 0) {
        gf_error_sys(err, "giving %s to uid %" PRIu64, ledger_tmp, uid);
        goto fail;
    }
    if (rename(tmp, dir) < 0) {
        gf_error_sys(err, "installing %s", dir);
        goto fail;
    }
    return 0;
fail:
    rm_tree(tmp);
    return -1;
}

void gf_admit_container(gf_agent *a, const gf_msg *in, gf_msg *out, const struct ucred *cr)
{
    gf_fraction_config cfg;
    char pipe[GF_PATH_MAX] = "-";
    gf_afraction *f;
    gf_error err;

    if (cr->uid != 0)
        return gf_reply_error(out, "only root (the container runtime) may admit a container");
    if (gf_admit_parse(in, &cfg, &err) < 0)
        return gf_reply_error(out, err.msg);
    gf_registry_scan_if_changed(a, &err);
    if (!gf_registry_find_name_fresh(a, cfg.name)) {
        if (gf_admit_check_fit(a, &cfg, &err) < 0 || make_fraction(a, &cfg, in, &err) < 0)
            return gf_reply_error(out, err.msg);
        gf_registry_scan_if_changed(a, &err);
        gf_agent_event(a, "admitted container fraction %s", cfg.name);
    }
    if (!(f = gf_registry_find_name_fresh(a, cfg.name)))
        return gf_reply_error(out, "the fraction vanished while it was made");
    if (f->cfg.mode == GF_MODE_SM_SHARING) {
        int g = gf_gpu_index(a, f->cfg.devices[0].uuid);
        if (g < 0 || gf_mps_ensure(a, g, pipe, sizeof(pipe), &err) < 0) {
            gf_release_fraction(a, f);
            return gf_reply_error(out, g < 0 ? "no such GPU" : err.msg);
        }
    }
    char config[GF_PATH_MAX + 16];
    snprintf(config, sizeof(config), "%s/config", f->dir);
    gf_msg_init(out, "ok");
    gf_msg_add(out, "config", config);
    gf_msg_add(out, "ledger", f->cfg.ledger);
    gf_msg_add(out, "socket", f->cfg.agent);
    gf_msg_add(out, "mps", pipe);
}

void gf_attach_container(gf_agent *a, const gf_msg *in, gf_msg *out, const struct ucred *cr)
{
    const char *name = gf_msg_get(in, "name");
    char text[32];
    uint64_t pid;
    gf_afraction *f;
    gf_error err;

    if (cr->uid != 0)
        return gf_reply_error(out, "only root (the container runtime) may attach a container");
    if (gf_msg_get_u64(in, "pid", &pid, &err) < 0 || !pid)
        return gf_reply_error(out, "pid= must be the container's init process");
    gf_registry_scan_if_changed(a, &err);
    if (!name || !(f = gf_registry_find_name_fresh(a, name)))
        return gf_reply_error(out, "name= names no fraction of this node");
    snprintf(text, sizeof(text), "%" PRIu64 "\n", pid);
    if (write_file(f->dir, "supervisor", text, 0444, &err) < 0)
        return gf_reply_error(out, err.msg);
    f->supervisor = (pid_t)pid;
    gf_msg_init(out, "ok");
}

void gf_release_fraction(gf_agent *a, gf_afraction *f)
{
    char old[GF_PATH_MAX + 96], name[GF_NAME_MAX];
    gf_error err;

    snprintf(name, sizeof(name), "%s", f->cfg.name);
    snprintf(old, sizeof(old), "%s/fractions/.old-%s", a->state_dir, name);
    if (rename(f->dir, old) == 0)
        rm_tree(old);
    gf_registry_scan_if_changed(a, &err);
    gf_agent_event(a, "released container fraction %s", name);
}

static bool has_live_slot(gf_afraction *f)
{
    for (int s = 0, high = gf_ledger_slot_high(&f->ledger); s < high; s++)
        if (atomic_load(&f->ledger.hdr->slots[s].pid) && gf_ledger_slot_live(&f->ledger, s))
            return true;
    return false;
}

static bool is_container(const gf_afraction *f)
{
    char path[GF_PATH_MAX + 16];
    snprintf(path, sizeof(path), "%s/identity", f->dir);
    return access(path, F_OK) == 0;
}

void gf_reconcile_containers(gf_agent *a)
{
    for (int i = 0; i < a->n_fractions; i++) {
        gf_afraction *f = &a->fractions[i];
        if (!f->supervisor || !is_container(f) || kill(f->supervisor, 0) == 0 || errno != ESRCH ||
            has_live_slot(f))
            continue;
        gf_agent_event(a, "container of fraction %s is gone and its poststop hook never "
                          "released it: releasing", f->cfg.name);
        gf_release_fraction(a, f);
        i = -1; /* the registry changed under us: start over */
    }
}
