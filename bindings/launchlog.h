/*
 * launchlog.h — the launch log (driver.c): what was submitted since the last sync that
 * succeeded, so an execution error or a timeout can name the kernels that were in flight.
 */
#ifndef GPULAB_LAUNCHLOG_H
#define GPULAB_LAUNCHLOG_H

#include <cuda.h>

/* A kernel name as the log keeps it: at most GL_LOG_NAME - 1 bytes, NUL-padded to GL_LOG_NAME. */
#define GL_LOG_NAME 64

void gl_log_launch(const char *kernel, const unsigned grid[3], const unsigned block[3],
                   CUstream stream);
/* The same for a name already cut and padded to GL_LOG_NAME bytes (gl_log_name): a launch's
 * entry is then fixed-size copies only. */
void gl_log_launch_padded(const char name[GL_LOG_NAME], const unsigned grid[3], const unsigned block[3],
                          CUstream stream);
/* Writes `name` into out as the log keeps it. */
void gl_log_name(char out[GL_LOG_NAME], const char *name);
/* Called after a sync that covered everything (context) or one stream succeeded. */
void gl_log_sync_ok(CUstream stream_or_null_for_all);

#endif
