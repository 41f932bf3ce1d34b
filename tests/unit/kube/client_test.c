/*
 * The Kubernetes client's requests (kube/client.c).  What it does against a
 * live API runs in tests/integration/test_watch.py (a scripted fake) and
 * tests/e2e (a real kube-apiserver).
 */
#include "base/diag.h"
#include "kube/client.h"

#include <criterion/criterion.h>
#include <stddef.h>
#include <string.h>

Test(client, a_dead_api_server_is_an_error_not_a_hang)
{
	struct kube_config c = {.server = (char *)"https://127.0.0.1:1",
				.insecure = true};
	struct kube *k;
	struct diag d;
	long status = 0;
	char *body = NULL;
	size_t len;

	diag_init(&d);
	k = kube_new(&c, &d);
	cr_assert_not_null(k);
	cr_assert_eq(kube_get(k, "/api/v1/pods", 1024, &status, &body, &len, NULL, &d), -1);
	cr_assert_null(body);
	cr_assert_not_null(strstr(diag_text(&d), "GET /api/v1/pods: "), "%s",
			   diag_text(&d));
	kube_free(k);
}
