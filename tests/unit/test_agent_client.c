/* SPDX-License-Identifier: Apache-2.0 */
/* The client side of the agent's socket when the agent is not answering:
 * a silent agent costs the caller its bound and is not asked again; one that
 * is not there (restarting) is asked again until it is, for a bounded time. */
#include "unit.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent_client.h"

static gf_msg ping(void)
{
    gf_msg m;
    gf_msg_init(&m, "ping");
    return m;
}

/* A peer on the other end of a socketpair: reads one request, then answers
 * with `answer` (NULL: none) and exits. */
static pid_t peer(int sv[2], const char *answer)
{
    pid_t pid = fork();
    char buf[GF_PROTO_MAX];

    assert_true(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        if (recv(sv[1], buf, sizeof(buf), 0) > 0 && answer)
            send(sv[1], answer, strlen(answer), 0);
        _exit(0);
    }
    close(sv[1]);
    return pid;
}

static void test_silent_agent_times_out_and_is_not_unreachable(void **state)
{
    gf_msg req = ping(), reply;
    gf_error err;
    int sv[2];

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    assert_int_equal(gf_agent_exchange_within(sv[0], "pair", &req, &reply, 100, &err), -1);
    assert_int_equal(err.code, GF_ESYS);
    assert_int_equal(err.sys_errno, ETIMEDOUT);
    assert_msg_has(err.msg, "did not answer within 100 ms");
    assert_false(gf_agent_unreachable(&err));
    close(sv[0]);
    close(sv[1]);
}

static void test_connection_cut_before_the_answer_is_unreachable(void **state)
{
    gf_msg req = ping(), reply;
    gf_error err;
    int sv[2];

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    pid_t pid = peer(sv, NULL);
    assert_int_equal(gf_agent_exchange_within(sv[0], "pair", &req, &reply, 5000, &err), -1);
    assert_int_equal(err.sys_errno, ECONNRESET);
    assert_msg_has(err.msg, "closed the connection before answering");
    assert_true(gf_agent_unreachable(&err));
    waitpid(pid, NULL, 0);
    close(sv[0]);
}

static void test_refusal_is_final(void **state)
{
    gf_msg req = ping(), reply;
    gf_error err;
    int sv[2];

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    pid_t pid = peer(sv, GF_PROTO_MAGIC " error msg=no");
    assert_int_equal(gf_agent_exchange_within(sv[0], "pair", &req, &reply, 5000, &err), -1);
    assert_int_equal(err.code, GF_ESTATE);
    assert_false(gf_agent_unreachable(&err));
    waitpid(pid, NULL, 0);
    close(sv[0]);
}

static void socket_path(char *out, size_t len)
{
    snprintf(out, len, "/tmp/gf-unit-agent-%d.sock", (int)getpid());
    unlink(out);
}

static void test_retry_gives_up_after_its_bound(void **state)
{
    gf_msg req = ping(), reply;
    char path[108];
    gf_error err;

    (void)state;
    socket_path(path, sizeof(path));
    assert_int_equal(gf_agent_request_retry(path, 1, 200, &req, &reply, &err), -1);
    assert_int_equal(err.sys_errno, ENOENT);
    assert_true(gf_agent_unreachable(&err));
    assert_msg_has(err.msg, "stayed unreachable for 200 ms", path);
}

/* The agent's socket appears 150 ms after the first try (a restart). */
static void test_retry_reaches_an_agent_that_comes_back(void **state)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct timespec later = {0, 150 * 1000 * 1000};
    gf_msg req = ping(), reply;
    char path[108], buf[GF_PROTO_MAX];
    gf_error err;
    pid_t pid;

    (void)state;
    socket_path(path, sizeof(path));
    memcpy(sa.sun_path, path, strlen(path) + 1);
    if ((pid = fork()) == 0) {
        int l = socket(AF_UNIX, SOCK_SEQPACKET, 0), c;
        nanosleep(&later, NULL);
        if (bind(l, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(l, 4) < 0 ||
            (c = accept(l, NULL, NULL)) < 0)
            _exit(1);
        if (recv(c, buf, sizeof(buf), 0) > 0)
            send(c, GF_PROTO_MAGIC " ok", strlen(GF_PROTO_MAGIC " ok"), 0);
        _exit(0);
    }
    assert_true(pid > 0);
    if (gf_agent_request_retry(path, 1, 5000, &req, &reply, &err) < 0)
        fail_msg("no answer: %s", err.msg);
    assert_string_equal(reply.verb, "ok");
    waitpid(pid, NULL, 0);
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_silent_agent_times_out_and_is_not_unreachable),
        cmocka_unit_test(test_connection_cut_before_the_answer_is_unreachable),
        cmocka_unit_test(test_refusal_is_final),
        cmocka_unit_test(test_retry_gives_up_after_its_bound),
        cmocka_unit_test(test_retry_reaches_an_agent_that_comes_back),
    };
    signal(SIGPIPE, SIG_IGN);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
