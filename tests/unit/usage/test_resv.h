/*
 * Records for the tests of the reservation document: its model
 * (tests/unit/usage/reservations_test.c) and its JSON
 * (tests/unit/kube/reservations_json_test.c).
 */
#ifndef GPUGATE_TESTS_TEST_RESV_H
#define GPUGATE_TESTS_TEST_RESV_H

#include "usage/reservations.h"

#include <stdint.h>

struct diag;

/* The first line of d, without its newline (valid until the next call). */
const char *test_resv_first(const struct diag *d);

/* A valid record: namespace "ns-<tenant>", name "obj-<uid>", replica
 * "gpugate-7d9-x", generation 1, no ownerJob, not riding. */
struct resv test_resv_record(const char *uid, enum usage_kind kind,
			     const char *tenant, const char *flavor,
			     int64_t per_pod, int64_t slots, int64_t at_ms);

/* Adds r to doc; the test fails when the document refuses it. */
void test_resv_add(struct resv_doc *doc, const struct resv *r);

#endif
