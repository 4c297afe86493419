// SPDX-License-Identifier: Apache-2.0 OR MIT
/* sslsniff's GnuTLS helper: a client (this process) and a server (a child named corebpf-gnutls) over a
 * socketpair through libgnutls.so.30, with anonymous ECDH key exchange (TLS 1.2, no certificate). Linked with the
 * library file itself; it declares the few functions it calls, so it needs no GnuTLS headers.
 *
 * It prints "client PID server PID", waits for a byte on stdin, then the client sends MSG1 with
 * gnutls_record_send, the server receives it with gnutls_record_recv and answers MSG2 the same way, and the client
 * prints "done". Exit status 0 only if both messages arrived whole. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct gnutls_session_int *gnutls_session_t;
int gnutls_global_init(void);
int gnutls_init(gnutls_session_t *session, unsigned int flags);
int gnutls_anon_allocate_server_credentials(void **sc);
int gnutls_anon_allocate_client_credentials(void **sc);
int gnutls_credentials_set(gnutls_session_t session, int type, void *cred);
int gnutls_priority_set_direct(gnutls_session_t session, const char *priorities, const char **err_pos);
void gnutls_transport_set_int2(gnutls_session_t session, int r, int s);
int gnutls_handshake(gnutls_session_t session);
ssize_t gnutls_record_send(gnutls_session_t session, const void *data, size_t data_size);
ssize_t gnutls_record_recv(gnutls_session_t session, void *data, size_t data_size);
const char *gnutls_strerror(int error);

#define GNUTLS_SERVER 1
#define GNUTLS_CLIENT 2
#define GNUTLS_CRD_ANON 2
#define MSG1 "GET /corebpf-gnutls HTTP/1.1\r\n\r\n"
#define MSG2 "reply from the gnutls server"

static void fail(const char *what, int err)
{
	fprintf(stderr, "%s failed: %s\n", what, err < 0 ? gnutls_strerror(err) : "");
	exit(1);
}

static gnutls_session_t tls(int fd, int server)
{
	gnutls_session_t session;
	void *cred;
	int err;

	if ((err = gnutls_init(&session, server ? GNUTLS_SERVER : GNUTLS_CLIENT)) < 0)
		fail("gnutls_init", err);
	err = server ? gnutls_anon_allocate_server_credentials(&cred) : gnutls_anon_allocate_client_credentials(&cred);
	if (err < 0 || (err = gnutls_credentials_set(session, GNUTLS_CRD_ANON, cred)) < 0)
		fail("credentials", err);
	if ((err = gnutls_priority_set_direct(session, "NORMAL:-VERS-TLS1.3:+ANON-ECDH", NULL)) < 0)
		fail("gnutls_priority_set_direct", err);
	gnutls_transport_set_int2(session, fd, fd);
	if ((err = gnutls_handshake(session)) < 0)
		fail("gnutls_handshake", err);
	return session;
}

static void expect(gnutls_session_t session, const char *want)
{
	char buf[4096];
	ssize_t n = gnutls_record_recv(session, buf, sizeof(buf));

	if (n != (ssize_t)strlen(want) || memcmp(buf, want, n))
		fail("gnutls_record_recv", (int)n);
}

static void send_all(gnutls_session_t session, const char *msg)
{
	ssize_t n = gnutls_record_send(session, msg, strlen(msg));

	if (n != (ssize_t)strlen(msg))
		fail("gnutls_record_send", (int)n);
}

int main(void)
{
	int fds[2], gate[2], status;
	gnutls_session_t session;
	pid_t server;
	char go;

	if (gnutls_global_init() < 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, fds) || pipe(gate))
		fail("setting up", 0);
	server = fork();
	if (server < 0)
		fail("fork", 0);
	if (server == 0) {
		prctl(PR_SET_NAME, "corebpf-gnutls");
		close(fds[0]);
		close(gate[1]);
		if (read(gate[0], &go, 1) != 1)
			fail("reading the go byte", 0);
		session = tls(fds[1], 1);
		expect(session, MSG1);
		send_all(session, MSG2);
		return 0;
	}
	close(fds[1]);
	close(gate[0]);
	printf("client %d server %d\n", (int)getpid(), (int)server);
	fflush(stdout);
	if (read(0, &go, 1) != 1 || write(gate[1], &go, 1) != 1)
		fail("passing the go byte on", 0);
	session = tls(fds[0], 0);
	send_all(session, MSG1);
	expect(session, MSG2);
	if (waitpid(server, &status, 0) != server || !WIFEXITED(status) || WEXITSTATUS(status))
		fail("the server", 0);
	printf("done\n");
	return fflush(stdout) != 0;
}
