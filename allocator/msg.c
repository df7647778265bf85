/* msg.c — see msg.h. */
#include "msg.h"

#include <unistd.h>

#include "os.h"

static void put(struct msg *m, char c)
{
	if (m->len < sizeof m->buf - 1)
		m->buf[m->len++] = c;
}

void msg_str(struct msg *m, const char *s)
{
	while (*s != '\0')
		put(m, *s++);
}

void msg_u64(struct msg *m, uint64_t v)
{
	char digits[20];
	int n = 0;
	do {
		digits[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	while (n > 0)
		put(m, digits[--n]);
}

void msg_field(struct msg *m, const char *name, uint64_t v)
{
	msg_str(m, name);
	msg_u64(m, v);
}

void msg_hex(struct msg *m, uint64_t v, int digits)
{
	static const char hex[] = "0123456789abcdef";
	for (int i = digits - 1; i >= 0; i--)
		put(m, hex[(v >> (4 * i)) & 15]);
}

void msg_send_to(struct msg *m, int fd)
{
	m->buf[m->len++] = '\n'; /* put() always leaves room for this byte */
	os_write_all(fd, m->buf, m->len);
	m->len = 0;
}

void msg_send(struct msg *m)
{
	msg_send_to(m, STDERR_FILENO);
}
