/*
 * metrics-int: what the files of metrics/ share and nobody else reads
 * (metrics.c renders, gangs.c keeps the gang-start series, label.c
 * writes label values).
 */
#ifndef GPUGATE_METRICS_INT_H
#define GPUGATE_METRICS_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct metrics_gangs;
struct strbuf;

/* A label value as written: clipped, anything outside [A-Za-z0-9._/-] as
 * '_' (no quote or backslash ever needs escaping). */
void metrics_label_copy(char *dst, size_t size, const char *src);

/* The gang-start series (metrics/gangs.c): made with the metrics, freed
 * with them, written by a scrape once metrics_gangs_on() was called. */
struct metrics_gangs *metrics_gangs_new(void);
void metrics_gangs_free(struct metrics_gangs *g);
void metrics_gangs_render(struct metrics_gangs *g, struct strbuf *sb);
/* What metrics.h's metrics_gangs_on(), metrics_gangs_waiting(),
 * metrics_gang_started() and metrics_gang_regated() do, on g. */
struct metrics_gang_waiting;
void metrics_gangs_set_on(struct metrics_gangs *g);
void metrics_gangs_put_waiting(struct metrics_gangs *g, const char *route,
			       const struct metrics_gang_waiting *rows, size_t n);
void metrics_gangs_observe(struct metrics_gangs *g, const char *route, double seconds);
void metrics_gangs_count_regate(struct metrics_gangs *g, const char *tenant);

/* The health loop's series (metrics/health.c): the gauges of the nodes
 * gpugate took out, from inv's nodes under p at now_ms (Unix ms); the
 * steps counter when on. */
struct inventory;
struct policy;
void metrics_health_render(struct strbuf *sb, const struct policy *p,
			   struct inventory *inv, int64_t now_ms, bool on,
			   const uint64_t steps[]);

/* The idle GPUs' series (metrics/idle.c): made with the metrics, freed
 * with them, written by a scrape once metrics_idle_on() was called. */
struct metrics_idle;
struct metrics_idle *metrics_idle_new(void);
void metrics_idle_free(struct metrics_idle *g);
void metrics_idle_render(struct metrics_idle *g, struct strbuf *sb);
/* What metrics.h's metrics_idle_on(), metrics_prometheus(),
 * metrics_idle_gpus() and metrics_gpu_busy() do, on g. */
struct metrics_idle_row;
void metrics_idle_set_on(struct metrics_idle *g, bool prom, const char *const *reasons,
			 size_t n);
void metrics_idle_set_up(struct metrics_idle *g, bool up, const char *reason);
void metrics_idle_put_gpus(struct metrics_idle *g, const struct metrics_idle_row *rows,
			   size_t n);
void metrics_idle_add_busy(struct metrics_idle *g, const struct metrics_idle_row *rows,
			   size_t n);

#endif
