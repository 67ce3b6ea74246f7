/*
 * A worker of several queues (worker layer): the scheduler that gives the
 * group's free slots to its members, strictly or by weight.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker_private.h"

/* The member would claim: it has a backlog, heard of work, its
 * registration is in doubt, or its own loop asked to. */
static int m_wants(const rjq_worker *m) {
    return m->g_want || rjq__w_rung(m) || m->mode == CL_HUNGRY || rjq__reg_out_of_step(m->reg);
}

/* Nothing known waits in its queue: its last claim came back short, it
 * is registered for pushes, and no claim of it is in flight. */
static int m_settled(const rjq_worker *m) {
    return !m_wants(m) && m->claiming == 0;
}

/* How many jobs its claims could ask for now, by its claims in flight
 * (rjq__w_claim_up_to's limits). */
static int m_room(const rjq_worker *m) {
    if (rjq__reg_out_of_step(m->reg) && m->claiming) return 0;
    int limit = m->mode == CL_HUNGRY ? CLAIMS_IN_FLIGHT : 1;
    return m->claiming < limit ? (limit - m->claiming) * rjq__w_claim_chunk(m) : 0;
}

/* How many its own slots would let it claim (its registered ones are
 * kept for pushes unless the claim replaces the registration, or it heard
 * the doorbell: work that was not pushed, such as a job group's, README
 * "Groups", which rjq__w_claim_up_to takes its offered slots back for, as
 * a worker of one queue does; before, an idle member whose slots were all
 * registered never claimed it). */
static int m_own(const rjq_worker *m) {
    int back = rjq__reg_out_of_step(m->reg) || rjq__w_rung(m);
    return rjq__w_own_free(m) + (back ? rjq__reg_offered(m->reg) : 0);
}

/* Give the group's free slots to its members. Strict: in queue order, a
 * member claims what it can; a later member claims only once every
 * earlier one is settled (its queue had nothing more ready). Weighted:
 * each claim (up to a chunk of free slots, CLAIMS_IN_FLIGHT in flight for
 * the group) goes to a member that would claim, by smooth weighted round
 * robin counted in slots, so that starts follow the weights while queues
 * have a backlog. Not re-entered (g->sched: a call while it runs returns, the run
 * under way sees the change); a run owed to a tick (kicked) stays owed. */
void rjq__w_schedule(group *g) {
    if (!rjq__w_group_sched(g, GE_ENTER)) return;
    if (g->order == RJQ_WORKER_STRICT) {
        for (int i = 0; i < g->n; i++) {
            rjq_worker *m = g->m[i];
            if (m->state != W_ACTIVE) continue;
            if (m_wants(m)) {
                m->g_want = 0;
                rjq__w_claim_up_to(m, g->concurrency);
            }
            if (!m_settled(m)) break;
        }
    } else {
        /* Each claim goes to the member whose turn it is, by smooth
         * weighted round robin counted in slots (a claim of k slots is k
         * turns), so that starts follow the weights while queues have a
         * backlog. The group's claims in flight are one worker's
         * (CLAIMS_IN_FLIGHT in all, not per member), each for up to a
         * chunk of slots: a claim takes the slots free when it goes, and a
         * script call costs Redis about the same whatever it carries, so
         * claims spread over more members one slot at a time would each
         * carry fewer jobs (a 3-shard queue's worker of 8 slots had 6
         * claims in flight: 1.5 jobs per claim and per completion call,
         * against 4 from one queue). A claim whose turn is a member's that
         * cannot claim more now (its claims in flight) waits until that
         * member's claim is answered (on_claimed kicks this again): giving
         * it to another would skew the shares. */
        int alloc[RJQ_WORKER_QUEUES_MAX] = {0}, ok[RJQ_WORKER_QUEUES_MAX],
            room[RJQ_WORKER_QUEUES_MAX];
        long total = 0;
        int calls = CLAIMS_IN_FLIGHT;
        for (int i = 0; i < g->n; i++) {
            rjq_worker *m = g->m[i];
            /* One whose own slots are all taken or registered for pushes
             * (which fill them) has nothing to claim with: its ask is
             * answered now, as a strict group's member's is when it
             * claimed nothing (a slot it frees, or a push handed back,
             * asks again). Left set, it counted as wanting for ever: its
             * credit grew while the others claimed, and a shards group's
             * other members took it for work waiting and claimed instead
             * of offering their freed slots back (rjq__w_offer). */
            if (m->g_want && m_own(m) <= 0) m->g_want = 0;
            /* (one refused for a permission waits for its timer, out of turn) */
            ok[i] = m->state == W_ACTIVE && m_wants(m) &&
                    !(m->refused_until && rjq__now_ms() < m->refused_until);
            room[i] = ok[i] ? m_room(m) : 0;
            if (!ok[i]) g->credit[i] = 0; /* nothing ready: no credit */
            else total += g->weight[i];
            calls -= m->claiming;
        }
        for (int free = rjq__w_group_free(g); free > 0 && total > 0 && calls > 0;) {
            int pick = -1;
            for (int i = 0; i < g->n; i++)
                if (ok[i] && (pick < 0 || g->credit[i] + g->weight[i] >
                                              g->credit[pick] + g->weight[pick]))
                    pick = i;
            int k = m_own(g->m[pick]) - alloc[pick];
            if (k <= 0) {
                /* its own slots are registered for pushes (they fill
                 * those): it takes no more now, the others take its turns */
                ok[pick] = 0;
                total -= g->weight[pick];
                continue;
            }
            if (room[pick] - alloc[pick] <= 0) break;
            int chunk = rjq__w_claim_chunk(g->m[pick]);
            if (k > chunk) k = chunk;
            if (k > room[pick] - alloc[pick]) k = room[pick] - alloc[pick];
            if (k > free) k = free;
            free -= k;
            calls--;
            for (int i = 0; i < g->n; i++)
                if (ok[i]) g->credit[i] += (long)g->weight[i] * k;
            g->credit[pick] -= total * k;
            alloc[pick] += k;
        }
        for (int i = 0; i < g->n; i++)
            if (alloc[i]) {
                g->m[i]->g_want = 0;
                rjq__w_claim_up_to(g->m[i], alloc[i]);
            }
    }
    rjq__w_group_sched(g, GE_LEAVE);
}

/* (one whose own slots are all registered claims nothing: the scheduler
 * passes it by. Its ask, g_want, is answered then (rjq__w_schedule); a
 * doorbell it heard stays pending until it claims, as a plain worker's
 * does when its slots are full, so its slots are still looked at here) */
int rjq__w_group_wants(const group *g, const rjq_worker *but) {
    for (int i = 0; i < g->n; i++) {
        const rjq_worker *m = g->m[i];
        if (m != but && m->state == W_ACTIVE && m_wants(m) && m_own(m) > 0) return 1;
    }
    return 0;
}

/* Claim: a member asks its group's scheduler. */
void rjq__w_claim(rjq_worker *w) {
    if (w->g == NULL) {
        rjq__w_claim_up_to(w, w->concurrency);
        return;
    }
    w->g_want = 1;
    rjq__w_schedule(w->g);
}
