/* The Lua scripts of the redis-stream guard (see stream_scripts.c for
 * each one's keys, arguments and replies). */
#ifndef LAB_STREAM_SCRIPTS_H
#define LAB_STREAM_SCRIPTS_H

#include "locks/rconn.h"

extern struct rconn_script stream_sale_script;
extern struct rconn_script stream_group_script;
extern struct rconn_script stream_cart_script;
extern struct rconn_script stream_undo_script;
extern struct rconn_script stream_seed_script;
extern struct rconn_script stream_queued_script;
extern struct rconn_script stream_side_script;
extern struct rconn_script stream_hold_script;
extern struct rconn_script stream_unhold_script;

#endif
