/*
 * launchlog.h — the launch log (driver.c): what was submitted since the last sync that
 * succeeded, so an execution error or a timeout can name the kernels that were in flight.
 */
#ifndef GPULAB_LAUNCHLOG_H
#define GPULAB_LAUNCHLOG_H

#include <cuda.h>

void gl_log_launch(const char *kernel, const unsigned grid[3], const unsigned block[3],
                   CUstream stream);
/* Called after a sync that covered everything (context) or one stream succeeded. */
void gl_log_sync_ok(CUstream stream_or_null_for_all);

#endif
