/* kvstore.c — critical memory in a small server: a key-value store speaking
 * a line protocol on stdin and stdout (so it runs as a filter, inetd-style
 * under systemd, or as k replicas under diehard), whose whole index — hash
 * buckets, entries, keys and values — is critical.
 *
 *   SET key value   -> OK
 *   GET key         -> VALUE value | NONE
 *   DEL key         -> OK | NONE
 *   COUNT           -> COUNT n
 *   STATS           -> STATS detected n repaired n unrepairable n
 *   anything else   -> ERROR what
 *
 * Keys are up to 31 bytes, values up to 95 (longer lines get ERROR). With
 * --plain the same store runs on malloc and plain loads and stores: the
 * unprotected twin. Lines are read with read(2) into a stack buffer and
 * answers written with write(2), so the only heap data is the index.
 *
 * Build: cc kvstore.c $(pkg-config --cflags --libs diehard)
 */
#include <diehard/critical.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEY_MAX 32
#define VALUE_MAX 96
#define BUCKETS 1024

struct entry {
	struct entry *next;
	char key[KEY_MAX];
	char value[VALUE_MAX];
};

static bool plain;
static struct entry **buckets; /* BUCKETS heads */
static long count;

static void *get_ptr(void *const *where)
{
	return plain ? *where : critical_load_ptr(where);
}

static void set_ptr(void *where, void *v)
{
	if (plain)
		memcpy(where, &v, sizeof v);
	else
		critical_store_ptr(where, v);
}

static void get_bytes(void *dst, const void *src, size_t n)
{
	if (plain)
		memcpy(dst, src, n);
	else
		critical_load(dst, src, n);
}

static void set_bytes(void *dst, const void *src, size_t n)
{
	if (plain)
		memcpy(dst, src, n);
	else
		critical_store(dst, src, n);
}

static unsigned hash(const char *s)
{
	unsigned h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h % BUCKETS;
}

/* The place that points at key's entry (or at the NULL ending its chain). */
static struct entry **find(const char *key)
{
	struct entry **at = &buckets[hash(key)];
	for (struct entry *e; (e = get_ptr((void *const *)at)) != NULL; at = &e->next) {
		char k[KEY_MAX];
		get_bytes(k, e->key, KEY_MAX);
		k[KEY_MAX - 1] = '\0';
		if (strcmp(k, key) == 0)
			break;
	}
	return at;
}

static void answer(const char *a, const char *b)
{
	char line[VALUE_MAX + 32];
	int n = snprintf(line, sizeof line, "%s%s%s\n", a, b[0] ? " " : "", b);
	if (n < 0 || write(STDOUT_FILENO, line, (size_t)n) != n)
		exit(1);
}

static void command(char *line)
{
	char *verb = strtok(line, " "), *key = strtok(NULL, " "), *value = strtok(NULL, "");
	if (verb == NULL) {
		answer("ERROR", "empty line");
	} else if (strcmp(verb, "COUNT") == 0 && key == NULL) {
		char n[24];
		snprintf(n, sizeof n, "%ld", count);
		answer("COUNT", n);
	} else if (strcmp(verb, "STATS") == 0 && key == NULL) {
		struct critical_counts c = { 0 };
		if (!plain)
			critical_counts(&c);
		char s[80];
		snprintf(s, sizeof s, "detected %llu repaired %llu unrepairable %llu", c.detected, c.repaired,
			 c.unrepairable);
		answer("STATS", s);
	} else if (key == NULL || strlen(key) >= KEY_MAX) {
		answer("ERROR", "a key of 1 to 31 bytes is needed");
	} else if (strcmp(verb, "GET") == 0 && value == NULL) {
		struct entry *e = get_ptr((void *const *)find(key));
		char v[VALUE_MAX];
		if (e != NULL) {
			get_bytes(v, e->value, VALUE_MAX);
			v[VALUE_MAX - 1] = '\0';
		}
		answer(e != NULL ? "VALUE" : "NONE", e != NULL ? v : "");
	} else if (strcmp(verb, "DEL") == 0 && value == NULL) {
		struct entry **at = find(key), *e = get_ptr((void *const *)at);
		if (e != NULL) {
			set_ptr(at, get_ptr((void *const *)&e->next));
			if (plain)
				free(e);
			else
				critical_free(e);
			count--;
		}
		answer(e != NULL ? "OK" : "NONE", "");
	} else if (strcmp(verb, "SET") == 0 && value != NULL && strlen(value) < VALUE_MAX) {
		struct entry **at = find(key), *e = get_ptr((void *const *)at);
		if (e == NULL) {
			e = plain ? calloc(1, sizeof *e) : critical_calloc(1, sizeof *e);
			if (e == NULL) {
				answer("ERROR", "out of memory");
				return;
			}
			char k[KEY_MAX] = { 0 };
			strcpy(k, key);
			set_bytes(e->key, k, KEY_MAX);
			set_ptr(at, e);
			count++;
		}
		char v[VALUE_MAX] = { 0 };
		strcpy(v, value);
		set_bytes(e->value, v, VALUE_MAX);
		answer("OK", "");
	} else {
		answer("ERROR", "unknown command or bad arguments");
	}
}

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--plain") == 0)
		plain = true;
	else if (argc > 1) {
		fprintf(stderr, "usage: kvstore [--plain] <commands\n");
		return 2;
	}
	buckets = plain ? calloc(BUCKETS, sizeof *buckets) : critical_calloc(BUCKETS, sizeof *buckets);
	if (buckets == NULL) {
		fprintf(stderr, "kvstore: out of memory\n");
		return 1;
	}
	char buf[4096], line[4096];
	size_t have = 0;
	bool too_long = false;
	for (;;) {
		ssize_t got = read(STDIN_FILENO, buf, sizeof buf);
		if (got < 0) {
			perror("kvstore: read");
			return 1;
		}
		if (got == 0)
			break;
		for (ssize_t i = 0; i < got; i++) {
			if (buf[i] != '\n') {
				if (have < sizeof line - 1)
					line[have++] = buf[i];
				else
					too_long = true;
				continue;
			}
			line[have] = '\0';
			if (have > 0 && line[have - 1] == '\r')
				line[have - 1] = '\0';
			if (too_long)
				answer("ERROR", "line too long");
			else
				command(line);
			have = 0;
			too_long = false;
		}
	}
	return 0;
}
