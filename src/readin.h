/*
 * A connection's bytes read straight into its hiredis reader's buffer
 * (issue 36, "Client"). hiredis reads a socket into a 16 KiB buffer on
 * the stack, then copies what it read into the reader's buffer
 * (redisReaderFeed): with payloads of KiB that copy was one of the three
 * of each payload on the read path (bench/README.md). rjq__readin reads
 * into the reader's buffer itself, so the kernel's copy is the only one
 * up to the reply's string. The reader is hiredis' public redisReader
 * (read.h: buf, pos, len, maxbuf) and its sds buffer: the same in
 * 0.14.1 and 1.x. A leaf: hiredis only.
 */
#ifndef RJQ_READIN_H
#define RJQ_READIN_H

#include <sys/types.h>

#include <hiredis/hiredis.h>

/* Bytes asked of the socket per read (hiredis' own: 16 KiB). */
#define RJQ__READIN_ROOM (16u << 10)
/* A bulk string this long or longer that the reader waits for is read to
 * its end and RJQ__READIN_PEEK bytes further, no more (at most
 * RJQ__READIN_MAX bytes a read): hiredis' reader moves what is left in its
 * buffer after each call (sdsrange, once 1 KiB of it was parsed) to the
 * front, so the next reply's bytes read along with a payload's end were
 * copied once more: a 16 KiB read cut a fetch's payloads anywhere, and
 * about half of each was moved. The peek takes the next string's head (a
 * payload after a payload: one read each) and is all that is moved. */
#define RJQ__READIN_EXACT_MIN (4u << 10)
#define RJQ__READIN_PEEK 64u
#define RJQ__READIN_MAX (1u << 20)

/* Read what fd has onto the end of r's buffer, as redisReaderFeed would
 * have added them: up to RJQ__READIN_ROOM bytes, or the rest of a long
 * bulk string the reader waits for and a peek (see above). Returns the bytes
 * read (> 0); 0 at the end of the stream (the peer closed); -1 with errno
 * set: EAGAIN or EINTR (nothing there now: try again later), ENOMEM (the
 * buffer could not grow: r is as it was), EINVAL (r is in an error
 * state: nothing read), or the read's own error. A buffer fully parsed is
 * started again at its front first, and one left big by an earlier reply
 * (more than 4 times the larger of r->maxbuf and the room; maxbuf 0:
 * never) is let go, as redisReaderFeed does beyond maxbuf. */
ssize_t rjq__readin(redisReader *r, int fd);

/* rjq__readin, also telling in *asked how many bytes the read asked for
 * (0 when it read nothing: r in error, no room). A read that got all it
 * asked for may have left more behind (a push of 16 KiB and more comes in
 * one write from Redis): the caller reads again once the reader has
 * parsed what came, rather than waiting for the loop to say the socket is
 * readable (ioglue.c do_read). */
ssize_t rjq__readin_asked(redisReader *r, int fd, size_t *asked);

#endif
