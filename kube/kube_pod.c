/* SPDX-License-Identifier: Apache-2.0 */
/* GET one pod. */
#include <stdio.h>
#include <stdlib.h>

#include "kube_impl.h"

int gf_kube_get_pod(gf_kube *k, const char *ns, const char *name, json_t **pod, gf_error *err)
{
    char *ens = curl_easy_escape(NULL, ns, 0), *ename = curl_easy_escape(NULL, name, 0);
    char *path = NULL, *resp = NULL, msg[256];
    long status = 0;
    int rc = -1;

    *pod = NULL;
    if (!ens || !ename || asprintf(&path, "/api/v1/namespaces/%s/pods/%s", ens, ename) < 0) {
        path = NULL;
        gf_error_set(err, GF_ENOSPACE, "out of memory");
        goto out;
    }
    if (gf_kube_request(k, "GET", path, NULL, NULL, &status, &resp, err) < 0)
        goto out;
    if (status != 200) {
        gf_kube_status_message(resp, msg, sizeof(msg));
        gf_error_set(err, status == 404 ? GF_ENOTFOUND : GF_ESTATE, "GET pod %s/%s: HTTP %ld: %s",
                     ns, name, status, msg);
        goto out;
    }
    if (!(*pod = json_loads(resp, 0, NULL))) {
        gf_error_set(err, GF_EINVAL, "GET pod %s/%s: the answer is not JSON", ns, name);
        goto out;
    }
    rc = 0;
out:
    curl_free(ens);
    curl_free(ename);
    free(path);
    free(resp);
    return rc;
}
