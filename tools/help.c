/* The rjq tool's help texts (help.h). */
#include "help.h"

#include <string.h>

static const char overview[] =
    "usage: rjq [connection options] [--prefix PREFIX] [-t SECONDS] [TLS options] [--json]\n"
    "           COMMAND [ARGS...]\n"
    "\n"
    "connection options (redis-cli's; applied in order, the last one naming a part wins,\n"
    "a URL setting only the parts it names):\n"
    "  -u, --url URL   Redis URL (default: $RJQ_URL, else $REDIS_URL, else\n"
    "                  redis://127.0.0.1:6379):\n"
    "                  redis://[user[:password]@]host[:port][/db], rediss://... (TLS),\n"
    "                  redis+sentinel://host:port[,host:port...]/MASTER[/db],\n"
    "                  unix://[user[:password]@]/path; host may be a name; query\n"
    "                  options ?db=N&username=U&password=P&timeout=SECONDS\n"
    "  -h HOST         server host (changes the URL's host)\n"
    "  -p PORT         server port (the key prefix is --prefix)\n"
    "  -a, --pass PASSWORD\n"
    "                  password (AUTH; default: the URL's, else $REDISCLI_AUTH)\n"
    "  --user USER     ACL user name (with a password)\n"
    "  -n DB           database number\n"
    "  --prefix PREFIX key prefix (default: rjq)\n"
    "  -t SECONDS      give up when Redis does not answer for this long (default: 10)\n"
    "\n"
    "TLS options (redis-cli's names; rediss:// URLs are TLS without --tls):\n"
    "  --tls             TLS for a redis:// URL too\n"
    "  --cacert FILE     trusted CA certificates (PEM); default: the system's\n"
    "  --cacertdir DIR   a directory of trusted CA certificates (also --cacert-dir)\n"
    "  --cert FILE       client certificate, for mutual TLS (with --key)\n"
    "  --key FILE        its private key\n"
    "  --sni NAME        server name to send and to check (default: the URL's host)\n"
    "  --insecure        check neither certificate nor name (never in production)\n"
    "\n"
    "--json (before the command or among its arguments): the result as one JSON value;\n"
    "bytes that are not UTF-8 as {\"base64\": \"...\"}\n"
    "\n"
    "commands:\n"
    "  queues       the queues written to, by name\n"
    "  processes    the processes running workers\n"
    "  top          a live view of every queue\n"
    "  cluster      each master: its slots, replicas, queues and share of the work\n"
    "  stats        a queue's counters and depths\n"
    "  shards       declare a queue's shard count; its shards\n"
    "  metrics      queues' counters and depths in Prometheus' text format\n"
    "  enqueue      enqueue a job, or one per stdin line\n"
    "  job          a job's state, attempts, payload, result, error\n"
    "  jobs         the job ids of a state\n"
    "  dead         the dead job ids\n"
    "  delete       delete a dead or cancelled job\n"
    "  purge        delete every dead (or cancelled) job\n"
    "  replay       move dead jobs back to ready\n"
    "  reclaim      sweep expired leases now\n"
    "  pause        start no job of a queue until resumed\n"
    "  resume       start jobs again\n"
    "  cancel       end a job for good\n"
    "  batch        make, fill, seal, read, await or delete a batch of jobs\n"
    "  batches      list a queue's batches\n"
    "  limit        a queue's concurrency and rate limits\n"
    "  groups       a queue's job groups, deepest first\n"
    "  group        set a job group's limits, weight, pause\n"
    "  index        declare the JSON fields a queue indexes; its coverage\n"
    "  find         the jobs whose indexed field has a value\n"
    "  schedule     set a repeatable or cron job\n"
    "  unschedule   remove a schedule\n"
    "  schedules    list a queue's schedules\n"
    "  scheduler    run a scheduler\n"
    "  serve        the HTTP API, the dashboard and /metrics\n"
    "  acl          print the ACL SETUSER lines of rjq's roles\n"
    "  version      the library's version (also --version)\n"
    "  help         this text; help COMMAND: a command's options and an example\n"
    "\n"
    "Options take their value as --name VALUE or --name=VALUE. rjq COMMAND --help (or\n"
    "rjq help COMMAND) tells a command's options. Exit status: 0 success, 1 error,\n"
    "2 usage error. Use -- to end options (e.g. rjq enqueue q -- --literal-payload).\n";

typedef struct cmdhelp {
    const char *name;
    const char *usage;   /* after "usage: rjq [options] " */
    const char *text;    /* what it does, then its options */
    const char *example; /* one command line */
} cmdhelp;

static const cmdhelp cmds[] = {
    {"queues", "queues [--after NAME] [--limit N] [--json]",
     "The queues written to (enqueued to, worked on, paused, limited), by name, from the\n"
     "registry (no keyspace scan).\n"
     "\n"
     "  --after NAME   start after this name\n"
     "  --limit N      at most N names (default: all)\n",
     "rjq queues --limit 10"},
    {"processes", "processes [--offset N] [--limit N] [--json]",
     "The processes running workers: client id, host, pid, name, start time, and per\n"
     "queue the workers' concurrency and running jobs, as of their last liveness beat.\n"
     "\n"
     "  --offset N     skip the first N processes\n"
     "  --limit N      at most N processes (default and most: 1000)\n",
     "rjq processes --json"},
    {"top", "top [--interval MS]",
     "A live terminal view of every queue: depths, rates, wait and run times, history.\n"
     "Up and down (or k and j) pick a queue, q quits. Needs a terminal.\n"
     "\n"
     "  --interval MS  refresh period (default 1000)\n",
     "rjq top --interval 500"},
    {"cluster", "cluster [--interval MS] [--json]",
     "Each master of a Redis Cluster: its address, slot ranges and replicas, its share\n"
     "of the work (commands from INFO commandstats, CPU from INFO cpu, and each one's\n"
     "percentage of all masters') and its queues (the registry's names whose slot it\n"
     "serves). On a standalone server: that server, with every queue.\n"
     "\n"
     "  --interval MS  the work done over MS ms (two samples), instead of since each\n"
     "                 server started\n",
     "rjq -u redis://127.0.0.1:7000 cluster --interval 1000"},
    {"stats", "stats QUEUE [--shards] [--json]",
     "The queue's counters and depths, one \"name value\" per line. A sharded queue's\n"
     "are its shards' summed (and \"shards N\" follows).\n"
     "\n"
     "  --shards       then each shard's, after a \"shard NAME\" line (with --json:\n"
     "                 one more object per shard, with \"shard\":NAME)\n"
     "  --json         one JSON object\n",
     "rjq stats orders"},
    {"shards", "shards QUEUE [N] [--json]",
     "Declare the queue's shard count N (1..16; 1: not sharded), then print its\n"
     "layout: \"shards N\" and a \"shard NAME\" line per shard. A new count is taken\n"
     "only while the queue is empty (no job ready, delayed or running). On a Redis\n"
     "Cluster the shards go to distinct masters (shard i on master i mod M).\n"
     "\n"
     "  --json         one JSON object\n",
     "rjq shards orders 3"},
    {"metrics", "metrics QUEUE... [--json]",
     "The queues' counters and depths in Prometheus' text format (a counter per\n"
     "transition: rjq_jobs_enqueued_total, rjq_jobs_completed_total, ...; rjq_jobs,\n"
     "rjq_queue_paused, ...).\n"
     "\n"
     "  --json         an object of each queue's stats\n",
     "rjq metrics orders emails"},
    {"enqueue",
     "enqueue QUEUE PAYLOAD [--id ID] [--delay MS] [--priority N] [--attempts N]\n"
     "           [--timeout MS] [--dedup MS] [--debounce]\n"
     "           [--after Q:ID[,Q:ID...] [--after-policy fail|run|ignore]] [--group G]\n"
     "           [--json]\n"
     "       rjq [options] enqueue QUEUE - [--delay MS] [--priority N] [--attempts N]\n"
     "           [--timeout MS]",
     "Enqueue one job and print its id; with PAYLOAD -, one job per line of standard\n"
     "input, and print how many.\n"
     "\n"
     "  --id ID        the job's id (an id already there is not enqueued again)\n"
     "  --delay MS     start no earlier than MS from now\n"
     "  --priority N   higher first (default 0)\n"
     "  --attempts N   runs before the job is dead (default 3)\n"
     "  --timeout MS   a run longer than this fails as timed out\n"
     "  --dedup MS     keep the id reserved this long after the job ends (with --id)\n"
     "  --debounce     a waiting job of that id takes this payload, due --delay from now\n"
     "  --after Q:ID,...  wait (state waiting) until these jobs of any queues finished\n"
     "  --after-policy P  a dependency that ended dead, cancelled or missing: fail\n"
     "                 (default: this job goes dead), run (runs anyway), ignore\n"
     "  --group G      the job's group (a tenant): groups are served round-robin, each\n"
     "                 with its own limits (rjq group); not with stdin payloads\n",
     "rjq enqueue orders '{\"order\":42}' --id order-42 --attempts 3"},
    {"job", "job QUEUE ID [--json]",
     "A job's state, attempts, payload, result, error, times and headers (\"header KEY\n"
     "VALUE\" lines), then its dependencies (\"after_policy P\", \"dependency QUEUE ID\n"
     "STATE counted HOW [error TEXT]\" lines) and the jobs still waiting for it\n"
     "(\"dependent QUEUE ID\" lines). At a terminal, control characters and bytes\n"
     "that are not UTF-8 are shown escaped (\\n, \\xNN, \\\\).\n"
     "\n"
     "  --json         one JSON object\n",
     "rjq job orders order-42"},
    {"jobs", "jobs QUEUE STATE [--offset N] [--limit N] [--json]",
     "The job ids of a state (ready, delayed, active, dead, cancelled, completed,\n"
     "waiting: for their dependencies), in queue order.\n"
     "\n"
     "  --offset N     skip the first N\n"
     "  --limit N      at most N (default 100, at most 1000)\n"
     "  --json         one JSON array\n",
     "rjq jobs orders ready --limit 20"},
    {"dead", "dead QUEUE [--offset N] [--limit N] [--json]",
     "The dead job ids, oldest first.\n"
     "\n"
     "  --offset N     skip the first N\n"
     "  --limit N      at most N (default 100)\n"
     "  --json         one JSON array\n",
     "rjq dead orders"},
    {"delete", "delete QUEUE ID",
     "Delete a dead or cancelled job for good (cancel a waiting or running one first).\n",
     "rjq delete orders order-42"},
    {"purge", "purge QUEUE dead|cancelled [--yes]",
     "Delete every dead (or cancelled) job and print how many. Asks at a terminal first.\n"
     "\n"
     "  --yes          do not ask (needed without a terminal)\n",
     "rjq purge orders dead --yes"},
    {"replay", "replay QUEUE ID\n       rjq [options] replay QUEUE --all [--limit N]",
     "Move a dead job back to ready, or the oldest dead jobs with --all, and print how\n"
     "many.\n"
     "\n"
     "  --all          the oldest dead jobs\n"
     "  --limit N      at most N of them (default 1000)\n",
     "rjq replay orders --all --limit 100"},
    {"reclaim", "reclaim QUEUE",
     "Sweep expired leases (and jobs past their timeout) now, and print how many jobs\n"
     "came back.\n",
     "rjq reclaim orders"},
    {"pause", "pause QUEUE [--create]",
     "Start no job of the queue until it is resumed (enqueues go on, running jobs run on).\n"
     "\n"
     "  --create       act on a queue that has nothing in Redis yet (else an error)\n",
     "rjq pause orders"},
    {"resume", "resume QUEUE [--create]",
     "Start jobs of a paused queue again.\n"
     "\n"
     "  --create       act on a queue that has nothing in Redis yet (else an error)\n",
     "rjq resume orders"},
    {"queue-format", "queue-format QUEUE 1|2 [--create]",
     "Set the queue's data format (README \"Operations\"). Format 2 keeps an awaited job's\n"
     "reply channel in its state: fewer Redis commands per awaited job. Set 2 only once\n"
     "every process using the queue runs a build of rjq that has this command (older\n"
     "ones do not read format 2); going back to 1 is refused while jobs are active.\n"
     "\n"
     "  --create       act on a queue that has nothing in Redis yet (else an error)\n",
     "rjq queue-format orders 2"},
    {"batch", "batch QUEUE ID [--add MQUEUE --payload P [--job-id J] | --seal | --await MS |\n"
              "       --delete [--force]]\n"
              "       batch QUEUE --create [--id ID] [--on-complete P] [--on-success P] [--retention MS]",
     "A batch of jobs (README \"Dependencies and batches\"), kept in QUEUE's keys. Without an\n"
     "option: its state (pending, completed, dead), whether it is sealed, its counts.\n"
     "\n"
     "  --create          make a batch (prints its id; numbered unless --id)\n"
     "  --on-complete P   the payload of its job enqueued in QUEUE when it ends\n"
     "  --on-success P    the same, only when no member died\n"
     "  --add MQUEUE      enqueue a member into MQUEUE with --payload P (prints its id)\n"
     "  --job-id J        with --add: the member's job id (else the server numbers it)\n"
     "  --seal            no more members: it ends once every member finished\n"
     "  --await MS        wait up to MS ms for it to end, then print it\n"
     "  --retention MS    keep it MS ms once it ended (default 86400000, 24 h; -1: until\n"
     "                    deleted)\n"
     "  --delete          delete it (its record and member marks); refused while pending\n"
     "  --force           with --delete: a pending one too (its members go on as plain\n"
     "                    jobs, its completion jobs are never enqueued)\n",
     "rjq batch reports --create --on-complete done"},
    {"batches", "batches QUEUE [--state S] [--limit N] [--json]",
     "List the batches kept in QUEUE's keys, newest created first: per batch its id, state,\n"
     "members finished of its total and its counts (README \"Dependencies and batches\").\n"
     "An ended batch past its retention is not listed.\n"
     "\n"
     "  --state S      only those in state S: pending, completed or dead\n"
     "  --limit N      at most N of them (default 100)\n"
     "  --json         an array of batch objects\n",
     "rjq batches reports --state pending"},
    {"cancel", "cancel QUEUE ID",
     "End a job for good (state cancelled); a running job's worker is told. Fails when\n"
     "the job had finished.\n",
     "rjq cancel orders order-42"},
    {"groups", "groups QUEUE [GROUP] [--limit N] [--json]",
     "The queue's job groups, deepest first: each one's ready jobs (depth), running\n"
     "jobs (active) and settings; \"groups N\" first (how many have work). With GROUP:\n"
     "that one.\n"
     "\n"
     "  --limit N      at most N groups (default 20, at most 1000)\n"
     "  --json         one JSON object\n",
     "rjq groups orders"},
    {"group", "group QUEUE GROUP [--concurrency N] [--weight N] [--rate N[/MS]] [--max-waiting N] "
              "[--pause|--resume]",
     "Set a job group's settings; GROUP '*' sets the defaults of every group (a\n"
     "group's own settings override them). Without an option: back to the defaults\n"
     "(a paused group stays paused: --resume).\n"
     "\n"
     "  --concurrency N  at most N of its jobs running at once, across all workers\n"
     "                   (0: none)\n"
     "  --weight N       jobs it may start per turn of the round-robin (default 1)\n"
     "  --rate N[/MS]    at most N of its jobs started per MS ms (default 1000),\n"
     "                   across all workers (0: none)\n"
     "  --max-waiting N  at most N of its jobs ready: an enqueue past it is refused\n"
     "                   as by a full queue (0: none)\n"
     "  --pause          start none of its jobs until --resume\n"
     "  --resume         start them again\n",
     "rjq group orders tenant-42 --concurrency 2"},
    {"limit", "limit QUEUE [--concurrency N] [--rate N[/MS]] [--create]",
     "At most N jobs active at once, at most N starts per MS ms; no option lifts the\n"
     "limits.\n"
     "\n"
     "  --concurrency N  jobs active at once, across all workers\n"
     "  --rate N[/MS]    starts per MS (default 1000) ms\n"
     "  --create         act on a queue that has nothing in Redis yet (else an error)\n",
     "rjq limit orders --concurrency 5 --rate 100/1000"},
    {"index", "index QUEUE [FIELD...] [--drop] [--no-fill] [--create]",
     "Without FIELD: the queue's index declaration and how many of its jobs the index\n"
     "covers. With FIELDs (at most 4; letters, digits, '_', '.', '-'): declare them (a\n"
     "declaration stored with the queue; another one replaces it and drops the index),\n"
     "then index the jobs there already in bounded steps (HSCAN of 1000 payloads each).\n"
     "The enqueue script then indexes each new job whose JSON payload has such a field\n"
     "at its top level (a string or a number); producers learn the declaration within\n"
     "10 s, and lookups scan instead while the index does not cover every job.\n"
     "\n"
     "  --drop      drop the index (no FIELD)\n"
     "  --no-fill   do not index the jobs there already\n"
     "  --create    act on a queue that has nothing in Redis yet (else an error)\n",
     "rjq index orders customer_id"},
    {"find", "find QUEUE FIELD VALUE [--limit N]",
     "The jobs whose indexed FIELD has VALUE (exactly; a number as its decimal text),\n"
     "one \"ID STATE\" per line, in id order: O(matches), from the index (rjq index).\n"
     "Fails while the index does not cover every job (the dashboard's search scans).\n"
     "\n"
     "  --limit N   at most N jobs (default: all)\n",
     "rjq find orders customer_id 42"},
    {"schedule",
     "schedule QUEUE NAME (--every MS | --cron EXPR) [--utc-offset MIN]\n"
     "           [--payload DATA] [--catchup MS] [--missed skip|once] [--priority N]\n"
     "           [--attempts N] [--timeout MS]",
     "Set a repeatable or cron job; a scheduler (rjq scheduler, or rjq_scheduler_start)\n"
     "enqueues one job per fire time, with the id NAME@<fire time ms>.\n"
     "\n"
     "  --every MS        every MS milliseconds\n"
     "  --cron EXPR       5 fields, or 6 with seconds first\n"
     "  --utc-offset MIN  the cron expression's time zone, minutes from UTC\n"
     "  --payload DATA    the jobs' payload\n"
     "  --catchup MS      fire times up to MS late are caught up (default 60000)\n"
     "  --missed skip|once  older ones are skipped, or run once\n"
     "  --priority N, --attempts N, --timeout MS  the jobs' options (see enqueue)\n",
     "rjq schedule reports nightly --cron '0 3 * * *' --payload '{\"kind\":\"daily\"}'"},
    {"unschedule", "unschedule QUEUE NAME", "Remove a schedule.\n", "rjq unschedule reports nightly"},
    {"schedules", "schedules QUEUE [--json]",
     "List the schedules: name, spec, next fire time (server ms; 0 until a scheduler\n"
     "computed it).\n"
     "\n"
     "  --json         one JSON array\n",
     "rjq schedules reports"},
    {"scheduler", "scheduler QUEUE [--lease MS]",
     "Run a scheduler for the queue's schedules until SIGINT/SIGTERM. Of all schedulers\n"
     "running one leads; another takes over within the lease when it dies.\n"
     "\n"
     "  --lease MS     the leader's lease (default 3000)\n",
     "rjq scheduler reports"},
    {"serve",
     "serve [--listen ADDR:PORT] [--queues PATTERN[,PATTERN...]] [--read-only]\n"
     "           [--token-file FILE] [--max-body BYTES] [--wait-max MS] [--max-queues N]\n"
     "           [--max-requests N] [--max-waiting N] [--request-timeout MS]\n"
     "           [--queue-idle MS] [--demo] [--log-format text|json] [--access-log]\n"
     "           [--metrics-shards] [--metrics-groups K]",
     "The HTTP API, the dashboard (/) and /metrics, until SIGINT/SIGTERM; prints\n"
     "\"listening on ADDR:PORT\" once it accepts. The connection options come before\n"
     "serve (rjq -h HOST -p PORT serve ...). See rjq(1) for the API.\n"
     "\n"
     "  --listen ADDR:PORT     where to listen (default 127.0.0.1:8080; port 0: any)\n"
     "  --queues PATTERN,...   serve only the queues matching a glob (default *)\n"
     "  --read-only            refuse every request but GET and HEAD (403)\n"
     "  --token-file FILE      require \"Authorization: Bearer TOKEN\" (the file's line)\n"
     "  --max-body BYTES       request bodies, payloads and results (default 16 MiB)\n"
     "  --wait-max MS          the longest ?wait= (default 600000)\n"
     "  --max-queues N         queues watched at once (default 1000)\n"
     "  --max-requests N       requests held at once (default 10000)\n"
     "  --max-waiting N        each queue's max_waiting: 429 past it (default none)\n"
     "  --request-timeout MS   time for a request to arrive whole (default 30000; 0: none)\n"
     "  --queue-idle MS        how long a queue stays watched after a request named it\n"
     "                         (default 60000)\n"
     "  --demo                 a demo worker pool on the queue \"demo\", driven from the page\n"
     "  --log-format F         text (default) or json: one JSON object per log line\n"
     "  --access-log           a log line per request answered (default: none)\n"
     "  --metrics-shards       /metrics: each shard of a sharded queue too (label shard)\n"
     "  --metrics-groups K     /metrics: the K busiest groups of each queue (label group;\n"
     "                         default 10, at most 100; 0: none)\n",
     "rjq -h redis.internal -p 6380 serve --listen 0.0.0.0:8080 --read-only"},
    {"acl", "acl [--queues PATTERN] [--role producer|worker|monitor|bridge] [--json]",
     "Print the ACL SETUSER lines of rjq's roles for the prefix (--prefix) and the queues\n"
     "matching PATTERN; put a password in place of CHANGE-ME. Contacts no Redis.\n"
     "\n"
     "  --queues PATTERN  a glob of queue names (default *)\n"
     "  --role R          only this role (default: producer, worker and monitor)\n",
     "rjq --prefix app acl --queues 'orders*' --role worker"},
    {"version", "version [--json]", "The library's version, as \"rjq MAJOR.MINOR.PATCH\".\n",
     "rjq version"},
    {"help", "help [COMMAND]",
     "The list of commands and the global options; with COMMAND, its usage, options and\n"
     "an example (as rjq COMMAND --help).\n",
     "rjq help enqueue"},
};

void help_overview(FILE *out) {
    fputs(overview, out);
}

int help_command(FILE *out, const char *name) {
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        const cmdhelp *c = &cmds[i];
        if (strcmp(c->name, name) != 0) continue;
        fprintf(out, "usage: rjq [options] %s\n\n%s\nexample:\n  %s\n\n", c->usage, c->text,
                c->example);
        fputs("options: the connection options (-u URL, -h HOST, -p PORT, -a PASSWORD, -n DB,\n"
              "--user USER, --prefix PREFIX, -t SECONDS, TLS options) come before the command:\n"
              "see rjq help.\n",
              out);
        return 0;
    }
    return -1;
}
