#!/usr/bin/env python3
"""json_roundtrip — a real command for the benchmark: CPython JSON encode/decode.

Why: CPython is a large real program. Objects of up to 512 bytes come from its
own small-object allocator; everything larger (long strings, the storage of
lists and dicts, the encoder's output buffer) goes through malloc and realloc.
A JSON round trip of a big nested document is a common real workload that
exercises both, so it shows what an allocator costs a real program.

It builds a nested document (dicts, lists, strings, ints, floats, booleans,
None) from a fixed-seed generator of its own (not the random module, whose
streams may change between Python versions), encodes it with json.dumps, decodes
it with json.loads, checks the decoded document equals the original, and prints
the sizes and a SHA-256 of the encoded text. The output is identical on every
run and under every allocator.
"""
import hashlib
import json
import sys

RECORDS = 25000
VOCABULARY_SIZE = 5000
ROUNDS = 2


class Generator:
    """A 64-bit linear congruential generator: deterministic everywhere."""

    def __init__(self, seed):
        self.state = seed

    def next(self):
        self.state = (self.state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        return self.state >> 33

    def below(self, bound):
        return self.next() % bound

    def word(self):
        return "".join(chr(97 + self.below(26)) for _ in range(1 + self.below(10)))


class Vocabulary:
    """Words drawn once, then picked at random: cheap to generate, and repeated
    words make the document look like real data."""

    def __init__(self, gen, size):
        self.gen = gen
        self.words = [gen.word() for _ in range(size)]

    def word(self):
        return self.words[self.gen.below(len(self.words))]


def make_record(gen, vocabulary, index):
    return {
        "id": index,
        "name": vocabulary.word() + " " + vocabulary.word(),
        "score": gen.below(1000000) / 1000.0,
        "active": gen.below(2) == 1,
        "parent": None if gen.below(4) == 0 else gen.below(index + 1),
        "tags": [vocabulary.word() for _ in range(gen.below(6))],
        "attributes": {vocabulary.word(): gen.below(10000) for _ in range(gen.below(5))},
        "history": [[gen.below(100), vocabulary.word()] for _ in range(gen.below(4))],
    }


def make_document(gen):
    vocabulary = Vocabulary(gen, VOCABULARY_SIZE)
    records = [make_record(gen, vocabulary, i) for i in range(RECORDS)]
    groups = {}
    for record in records:
        groups.setdefault(record["name"][0], []).append(record["id"])
    return {"version": 1, "records": records, "groups": groups}


def main():
    document = make_document(Generator(0x5DEECE66D))
    digest = hashlib.sha256()
    total_length = 0
    for _ in range(ROUNDS):
        text = json.dumps(document, sort_keys=True)
        decoded = json.loads(text)
        if decoded != document:
            print("json_roundtrip: decoded document differs from the original",
                  file=sys.stderr)
            return 1
        digest.update(text.encode())
        total_length += len(text)
        document = decoded
    print("records", RECORDS, "encoded characters", total_length)
    print("checksum", digest.hexdigest())
    return 0


if __name__ == "__main__":
    sys.exit(main())
