/*
 * The deprecated names (rjq.h "Deprecated names", README "Naming"): each
 * the function its new name gives, for programs written or built before
 * the verb rule. Removed at 1.0.
 */
#include "rjq.h"

size_t rjq_client_awaits(const rjq_client *c) {
    return rjq_client_count_awaits(c);
}

int rjq_client_connected(const rjq_client *c) {
    return rjq_client_is_connected(c);
}

void *rjq_client_data(const rjq_client *c) {
    return rjq_client_get_data(c);
}

const char *rjq_client_errmsg(const rjq_client *c) {
    return rjq_client_get_errmsg(c);
}

int rjq_client_masters(rjq_client *c, int argc, const char *const *argv, const size_t *lens,
                       rjq_masters_cb *cb, void *data) {
    return rjq_client_send_to_masters(c, argc, argv, lens, cb, data);
}

int rjq_client_memory(rjq_client *c, rjq_memory_cb *cb, void *data) {
    return rjq_client_get_memory(c, cb, data);
}

int rjq_client_processes(rjq_client *c, long offset, long limit, rjq_processes_cb *cb, void *data) {
    return rjq_client_list_processes(c, offset, limit, cb, data);
}

int rjq_client_queues(rjq_client *c, const char *after, long limit, rjq_ids_cb *cb, void *data) {
    return rjq_client_list_queues(c, after, limit, cb, data);
}

const rjq_enqueued *rjq_enqueued_at(const rjq_enqueued *jobs, size_t i) {
    return rjq_enqueued_get(jobs, i);
}

const rjq_process *rjq_process_at(const rjq_process *list, size_t i) {
    return rjq_process_get(list, i);
}

const rjq_process_queue *rjq_process_queue_at(const rjq_process_queue *list, size_t i) {
    return rjq_process_queue_get(list, i);
}

const rjq_schedule_info *rjq_schedule_info_at(const rjq_schedule_info *list, size_t i) {
    return rjq_schedule_info_get(list, i);
}

int rjq_job_attempt(const rjq_job *job) {
    return rjq_job_get_attempt(job);
}

const char *rjq_job_id(const rjq_job *job) {
    return rjq_job_get_id(job);
}

int rjq_job_max_attempts(const rjq_job *job) {
    return rjq_job_get_max_attempts(job);
}

int rjq_job_notice(const rjq_job *job) {
    return rjq_job_get_notice(job);
}

const void *rjq_job_payload(const rjq_job *job, size_t *len) {
    return rjq_job_get_payload(job, len);
}

int rjq_job_progress(rjq_job *job, const void *progress, size_t len) {
    return rjq_job_report_progress(job, progress, len);
}

rjq_queue *rjq_job_queue(const rjq_job *job) {
    return rjq_job_get_queue(job);
}

const char *rjq_job_token(const rjq_job *job) {
    return rjq_job_get_token(job);
}

rjq_worker *rjq_job_worker(const rjq_job *job) {
    return rjq_job_get_worker(job);
}

int rjq_monitor_resyncs(rjq_monitor *m) {
    return rjq_monitor_enable_resyncs(m);
}

long long rjq_monitor_time(const rjq_monitor *m) {
    return rjq_monitor_get_time(m);
}

rjq_client *rjq_queue_client(const rjq_queue *q) {
    return rjq_queue_get_client(q);
}

int rjq_queue_dead(rjq_queue *q, long offset, long limit, rjq_ids_cb *cb, void *data) {
    return rjq_queue_list_dead(q, offset, limit, cb, data);
}

int rjq_queue_job(rjq_queue *q, const char *id, rjq_job_info_cb *cb, void *data) {
    return rjq_queue_get_job(q, id, cb, data);
}

int rjq_queue_jobs(rjq_queue *q, rjq_job_state state, long offset, long limit, rjq_ids_cb *cb,
                   void *data) {
    return rjq_queue_list_jobs(q, state, offset, limit, cb, data);
}

const char *rjq_queue_name(const rjq_queue *q) {
    return rjq_queue_get_name(q);
}

int rjq_queue_slot(const rjq_queue *q) {
    return rjq_queue_get_slot(q);
}

int rjq_queue_stats(rjq_queue *q, rjq_stats_cb *cb, void *data) {
    return rjq_queue_get_stats(q, cb, data);
}

int rjq_scheduler_leading(const rjq_scheduler *s) {
    return rjq_scheduler_is_leading(s);
}

int rjq_tls_available(void) {
    return rjq_tls_is_available();
}

int rjq_worker_running(const rjq_worker *w) {
    return rjq_worker_count_running(w);
}
