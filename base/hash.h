/*
 * hash: FNV-1a (64-bit), the one string hash of the tree: the hash maps
 * (base/strmap.c) and the gang id (policy/decide-plan.c) use it.  Not for
 * anything an attacker may choose to collide against a secret: it is
 * neither keyed nor cryptographic.
 */
#ifndef GPUGATE_HASH_H
#define GPUGATE_HASH_H

#include <stdint.h>

#define HASH_FNV1A_SEED 1469598103934665603ull

/* Folds the bytes of s (NULL: none) into h; start with HASH_FNV1A_SEED. */
static inline uint64_t hash_fnv1a(uint64_t h, const char *s)
{
	for (; s && *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ull;
	}
	return h;
}

#endif
