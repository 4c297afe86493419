// SPDX-License-Identifier: Apache-2.0 OR MIT
/* sslsniff's test helper: a TLS client (this process) and server (a child it forks, named corebpf-tls-srv) over a
 * socketpair, through the system's libssl.so.3. It is linked with the library files themselves and declares the
 * few functions it calls, so it needs no OpenSSL headers. No certificate is needed: TLS 1.2 with an anonymous
 * ECDH cipher.
 *
 * It prints "client PID server PID", waits for a byte on stdin (the test sends it once the tool is attached), then:
 *   client SSL_write    of MSG1                 server SSL_read     (one record: the whole message)
 *   client SSL_write_ex of 100 bytes pattern    server SSL_read_ex
 *   client SSL_write_ex of BIG bytes pattern    server SSL_read_ex
 *   server SSL_write    of MSG2                 client SSL_read_ex
 * and prints "done". The pattern is 'a' + i % 26. Exit status 0 only if every call moved what it should. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_method_st SSL_METHOD;
const SSL_METHOD *TLS_method(void);
SSL_CTX *SSL_CTX_new(const SSL_METHOD *method);
long SSL_CTX_ctrl(SSL_CTX *ctx, int cmd, long larg, void *parg);
int SSL_CTX_set_cipher_list(SSL_CTX *ctx, const char *list);
SSL *SSL_new(SSL_CTX *ctx);
int SSL_set_fd(SSL *s, int fd);
int SSL_connect(SSL *s);
int SSL_accept(SSL *s);
int SSL_write(SSL *s, const void *buf, int num);
int SSL_read(SSL *s, void *buf, int num);
int SSL_write_ex(SSL *s, const void *buf, size_t num, size_t *written);
int SSL_read_ex(SSL *s, void *buf, size_t num, size_t *readbytes);
void ERR_print_errors_fp(FILE *fp);

#define SSL_CTRL_SET_MAX_PROTO_VERSION 124
#define TLS1_2_VERSION 0x0303
#define MSG1 "GET /corebpf-sslsniff HTTP/1.1\r\nHost: test\r\n\r\n"
#define MSG2 "reply from the server"
#define MID 100
#define BIG 10000

static void fail(const char *what)
{
	fprintf(stderr, "%s failed\n", what);
	ERR_print_errors_fp(stderr);
	exit(1);
}

static SSL *tls(int fd, int server)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_method());
	SSL *ssl;

	if (!ctx)
		fail("SSL_CTX_new");
	SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MAX_PROTO_VERSION, TLS1_2_VERSION, NULL);
	if (SSL_CTX_set_cipher_list(ctx, "aNULL:@SECLEVEL=0") != 1)
		fail("SSL_CTX_set_cipher_list");
	ssl = SSL_new(ctx);
	if (!ssl || SSL_set_fd(ssl, fd) != 1)
		fail("SSL_new");
	if ((server ? SSL_accept(ssl) : SSL_connect(ssl)) != 1)
		fail(server ? "SSL_accept" : "SSL_connect");
	return ssl;
}

static void expect_read(SSL *ssl, int ex, const char *want, size_t len)
{
	static char buf[16384];
	size_t got = 0;
	int n;

	if (ex) {
		if (SSL_read_ex(ssl, buf, sizeof(buf), &got) != 1)
			fail("SSL_read_ex");
	} else {
		n = SSL_read(ssl, buf, sizeof(buf));
		if (n <= 0)
			fail("SSL_read");
		got = n;
	}
	if (got != len || memcmp(buf, want, len))
		fail("reading the expected message");
}

static void write_ex(SSL *ssl, const char *data, size_t len)
{
	size_t written = 0;

	if (SSL_write_ex(ssl, data, len, &written) != 1 || written != len)
		fail("SSL_write_ex");
}

int main(void)
{
	static char pattern[BIG];
	int fds[2], gate[2], status;
	char go;
	pid_t server;
	SSL *ssl;

	for (int i = 0; i < BIG; i++)
		pattern[i] = 'a' + i % 26;
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) || pipe(gate))
		fail("socketpair");
	server = fork();
	if (server < 0)
		fail("fork");
	if (server == 0) {
		prctl(PR_SET_NAME, "corebpf-tls-srv");
		close(fds[0]);
		close(gate[1]);
		/* The server starts its handshake only after the go byte too. */
		if (read(gate[0], &go, 1) != 1)
			fail("reading the go byte");
		ssl = tls(fds[1], 1);
		expect_read(ssl, 0, MSG1, strlen(MSG1));
		expect_read(ssl, 1, pattern, MID);
		expect_read(ssl, 1, pattern, BIG);
		if (SSL_write(ssl, MSG2, strlen(MSG2)) != (int)strlen(MSG2))
			fail("SSL_write");
		return 0;
	}
	close(fds[1]);
	close(gate[0]);
	printf("client %d server %d\n", (int)getpid(), (int)server);
	fflush(stdout);
	if (read(0, &go, 1) != 1)
		fail("reading the go byte");
	if (write(gate[1], &go, 1) != 1)
		fail("passing the go byte on");
	ssl = tls(fds[0], 0);
	if (SSL_write(ssl, MSG1, strlen(MSG1)) != (int)strlen(MSG1))
		fail("SSL_write");
	write_ex(ssl, pattern, MID);
	write_ex(ssl, pattern, BIG);
	expect_read(ssl, 1, MSG2, strlen(MSG2));
	if (waitpid(server, &status, 0) != server || !WIFEXITED(status) || WEXITSTATUS(status))
		fail("the server");
	printf("done\n");
	return fflush(stdout) != 0;
}
