/* SPDX-License-Identifier: Apache-2.0 */
/* gpufrac-runtime: an OCI runtime wrapper around runc. It
 * acts on `create` (and `run`) of a container whose spec carries fraction
 * annotations, on `delete`, and on its own `hook attach|release` mode;
 * everything else execs the real runtime with the argv untouched. */
#ifndef GPUFRAC_RUNTIME_H
#define GPUFRAC_RUNTIME_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "annotations.h"
#include "config.h"
#include "error.h"
#include "proto.h"

#define RT_NAME "gpufrac-runtime"
/* Where things appear inside a fractional container. */
#define RT_SHIM_IN "/usr/local/lib/gpufrac/libgpufrac.so"
#define RT_CONFIG_IN "/etc/gpufrac/fraction.conf"
#define RT_PRELOAD_IN "/etc/ld.so.preload"
#define RT_CONF_FILE "/etc/gpufrac/runtime.conf"
#define RT_HOOK_TIMEOUT_S 30

/* ---- the command line, as runc takes it ---------------------------------- */
typedef struct rt_args {
    int argc;
    char **argv;            /* the original, passed on untouched */
    const char *log_path;   /* --log, NULL when absent */
    const char *log_format; /* --log-format, NULL = text */
    const char *root;       /* --root, NULL = runc's default */
    const char *verb;       /* NULL when none */
    const char *bundle;     /* create/run: --bundle/-b, NULL = cwd */
    const char *process;    /* exec: --process/-p, NULL when absent */
    const char *id;         /* the first operand after the verb */
    bool version;           /* --version or -v before any verb (runc's own flag) */
} rt_args;

void rt_args_parse(int argc, char **argv, rt_args *a);

/* ---- settings: env, then /etc/gpufrac/runtime.conf, then defaults -------- */
typedef struct rt_settings {
    char real_runtime[GF_PATH_MAX]; /* absolute */
    char state[GF_PATH_MAX];        /* the agent's state directory */
    char shim[GF_PATH_MAX];         /* libgpufrac.so on the host */
    char self[GF_PATH_MAX];         /* this program, for the hooks */
    bool nvfractions;               /* KAI's pod-level forms count too (chart's nvFractions) */
} rt_settings;

int rt_settings_load(rt_settings *s, gf_error *err);
/* Finds the real runtime: GPUFRAC_REAL_RUNTIME, else the name this program
 * was called by (gpufrac-runtime-crun: crun; how an engine whose runtime
 * entry cannot carry flags or env picks its own), else real_runtime=, else
 * runc on PATH. */
int rt_settings_real(rt_settings *s, const char *argv0, gf_error *err);
/* The host path of the shim (GPUFRAC_SHIM, <exe dir>/../lib, /usr/local). */
int rt_settings_shim(rt_settings *s, gf_error *err);

/* ---- the real runtime ---------------------------------------------------- */
/* execv()s it with argv (argv[0] replaced); returns only on failure. */
int rt_exec_real(const rt_settings *s, char **argv, gf_error *err);
/* Runs it as a child and returns its exit status (128+signal when killed). */
int rt_run_real(const rt_settings *s, char **argv, gf_error *err);

/* ---- reporting: stderr and the --log file (json or text) ----------------- */
void rt_report(const rt_args *a, const char *level, const char *msg);

/* ---- the bundle's config.json -------------------------------------------- */
/* Writes a temp file next to path and renames it over path. */
int rt_spec_save(const char *path, json_t *spec, gf_error *err);
const char *rt_spec_annotation(json_t *spec, const char *key);
/* The source of the mount at dest (the last one: it shadows the others in
 * the container), NULL when none. */
const char *rt_spec_mount_source(json_t *spec, const char *dest);
const char *rt_spec_env_get(json_t *spec, const char *name);
int rt_spec_env_unset(json_t *spec, const char *name, gf_error *err);
int rt_spec_env_set(json_t *spec, const char *name, const char *value, gf_error *err);
/* Drops mounts at dest, then appends a bind of src at dest. */
int rt_spec_bind(json_t *spec, const char *src, const char *dest, bool ro, gf_error *err);
int rt_spec_hook(json_t *spec, const char *kind, const char *path, const char *const *args,
                 const char *env, gf_error *err);

/* ---- the devices a fraction gets ----------------------------------------- */
typedef struct rt_device {
    char uuid[GF_UUID_MAX];
    uint64_t request, limit; /* bytes */
} rt_device;

typedef struct rt_devices {
    size_t n;
    rt_device dev[GF_CONFIG_DEVICES_MAX];
    char visible[GF_DEVICES_MAX]; /* NVIDIA_VISIBLE_DEVICES for the container */
    int place;                    /* > 0: no device assignment; the agent places this many GPUs */
} rt_devices;

/* From gpus.devices (UUIDs, CDI names, indices), else the spec's own
 * NVIDIA_VISIBLE_DEVICES list, amounts resolved against each GPU's NVML
 * total; else none yet (place = num_devices): the agent places the fraction
 * and rt_agent_admit fills the devices from its reply. */
int rt_devices_resolve(const gf_pod_fraction *pf, const char *key, const char *spec_visible,
                       rt_devices *out, gf_error *err);

/* ---- the agent ----------------------------------------------------------- */
typedef struct rt_admitted {
    char config[GF_PATH_MAX];
    char ledger[GF_PATH_MAX];
    char socket[GF_PATH_MAX];
    char mps[GF_PATH_MAX]; /* "" when none */
} rt_admitted;

typedef struct rt_identity {
    char name[GF_NAME_MAX]; /* the fraction */
    const char *ns, *pod, *container, *sandbox;
    const char *termlog; /* host file at the terminationMessagePath, NULL when none */
} rt_identity;
/* A reply the wrapper cannot use after the agent said ok is released before
 * the error is returned: a failed admit leaves nothing at the agent. */
int rt_agent_admit(const rt_settings *s, const rt_identity *id, const gf_pod_fraction *pf,
                   rt_devices *d, rt_admitted *out, gf_error *err);
int rt_agent_attach(const rt_settings *s, const char *name, long pid, gf_error *err);
int rt_agent_release(const rt_settings *s, const char *name, gf_error *err);

/* ---- the bundle: config.json read completely, then its fraction ---------- */
#define RT_SPEC_MAX (16u << 20) /* bytes of config.json */

/* Who made the bundle (runtime/engine.c). */
typedef enum rt_engine {
    RT_ENGINE_OCI = 0, /* none we know: a plain OCI caller */
    RT_ENGINE_CRI,     /* containerd's CRI (io.kubernetes.cri.* annotations) */
    RT_ENGINE_DOCKER,  /* dockerd (its <data-root>/containers/<id>/config.v2.json) */
    RT_ENGINE_PODMAN,  /* podman (io.container.manager: libpod) */
} rt_engine;

/* The request in the container's environment (an engine without
 * annotations: Docker 20.10), each the per-container annotation key it
 * stands for. */
#define RT_ENV_PREFIX "GPUFRAC_GPU"
#define RT_ENV_NAME_MAX 64 /* bytes of an engine's container name, NUL included */
#define RT_ENV_KEY_MAX 400 /* bytes of the key one stands for (the container: up to an id) */

typedef struct rt_bundle {
    json_t *spec;
    gf_kv *kv; /* every annotation (all strings), pointing into spec */
    size_t n_kv;
    bool sandbox;                      /* io.kubernetes.cri.container-type: sandbox */
    rt_engine engine;                  /* from rt_bundle_decode */
    char engine_name[RT_ENV_NAME_MAX]; /* the engine's container name (docker, podman) */
    char (*env_keys)[RT_ENV_KEY_MAX];  /* the annotation keys the env form stands for (owned) */
    rt_identity id;                    /* from rt_bundle_decode; id.name is create's */
    gf_pod_fraction pf;                /* from rt_bundle_decode */
} rt_bundle;

typedef struct rt_bundle_opts {
    bool nvfractions;          /* KAI's pod-level forms count */
    const char *fallback_name; /* the container's name without CRI's: its id */
    /* Whether container takes the pod-level forms naming no container (the
     * pod's first to start; create: rt_pod_claim). Fails when it cannot tell. */
    int (*claim)(const void *ctx, const char *sandbox, const char *container, bool *mine,
                 gf_error *err);
    const void *claim_ctx;
    /* create's: the container id and the bundle directory, from which the
     * engine's own records name the container (NULL: not looked at, and
     * the env form is not read: the fuzzer's decoder knows annotations) */
    const char *id;
    const char *bundle_dir;
} rt_bundle_opts;

/* A regular file (no link followed, no FIFO waited on) of at most
 * RT_SPEC_MAX bytes, then rt_bundle_parse. The error is the reason alone;
 * the caller names the file. */
int rt_bundle_read(const char *path, rt_bundle *b, gf_error *err);
/* One JSON object: no duplicate keys, no \u0000, valid UTF-8, nothing after
 * it; annotations absent, null or an object of strings. */
int rt_bundle_parse(const char *text, size_t len, rt_bundle *b, gf_error *err);
/* The identity and the fraction. Not fractional only when no annotation
 * names the container (rt_bundle_naming_key); else fractional or an error. */
int rt_bundle_decode(rt_bundle *b, const rt_bundle_opts *o, gf_error *err);
/* The first annotation that names container as gpufrac reads keys:
 * <nvidia.com/container.><container>.*, kai.scheduler/container.<container>
 * .gpu-memory.portion.limit, gpu-fraction-container-name: <container>. */
const gf_kv *rt_bundle_naming_key(const gf_kv *kv, size_t n, const char *container);
void rt_bundle_free(rt_bundle *b);

/* Sets b->engine and, for docker and podman, b->engine_name (the engine's
 * own name for the container, from its root-owned records; the container
 * id's first 12 characters when they cannot be read). A podman bundle that
 * carries CRI's identity annotations is refused. */
int rt_engine_detect(rt_bundle *b, const rt_bundle_opts *o, gf_error *err);
const char *rt_engine_label(rt_engine e);
/* The env form (GPUFRAC_GPU_* in process.env) as annotation keys of
 * container, appended to kv (room for RT_ENV_FORMS more entries); *added is
 * how many. Refused under CRI, for an unknown GPUFRAC_GPU_* name, a name set
 * twice, and next to an annotation asking for the same container. */
#define RT_ENV_FORMS 5
int rt_engine_env_form(rt_bundle *b, const char *container, gf_kv *kv, size_t n, size_t *added,
                       gf_error *err);
/* Rewrites the annotation key an env-form error names back to the env
 * variable the user wrote. */
void rt_engine_env_error(const rt_bundle *b, gf_error *err);

/* ---- <state>/containers/<id>: container id -> fraction name -------------- */
/* The first line is the fraction's name; then the NAME=value lines of the
 * environment the fraction's processes get (for exec). */
int rt_map_write(const rt_settings *s, const char *id, const char *name, const char *env,
                 gf_error *err);
int rt_map_read(const rt_settings *s, const char *id, char *name, size_t len);
/* The environment lines of a container's entry (*found false: no entry);
 * an entry that cannot be read whole is an error. */
int rt_map_env(const rt_settings *s, const char *id, char *env, size_t len, bool *found,
               gf_error *err);
/* <state>/pods/<sandbox id>: the container that took the pod-level forms
 * (gpu-fraction, gpu-memory) when they name no container. Sets *mine when
 * container is (or now becomes) that container; fails when it cannot tell. */
int rt_pod_claim(const rt_settings *s, const char *sandbox, const char *container, bool *mine,
                 gf_error *err);
void rt_pod_claim_remove(const rt_settings *s, const char *sandbox);
void rt_map_remove(const rt_settings *s, const char *id);
/* Removes the entries whose fraction the agent no longer holds. */
void rt_map_prune(const rt_settings *s);
/* <state>/ld.so.preload naming RT_SHIM_IN; created when missing. */
int rt_preload_file(const rt_settings *s, char *path, size_t len, gf_error *err);

/* ---- verbs ---------------------------------------------------------------- */
int rt_create(const rt_args *a, rt_settings *s);
int rt_delete(const rt_args *a, const rt_settings *s);
int rt_exec_verb(const rt_args *a, const rt_settings *s);
int rt_hook(int argc, char **argv, const rt_settings *s);

/* The fraction's name for a container: k8s.<sandbox id:12>.<container>;
 * docker.<id:12>.<name> and podman.<id:12>.<name> for those engines'. */
int rt_fraction_name(const rt_identity *who, rt_engine engine, const char *id, char *out,
                     size_t len);

#endif
