/*
 * fake_observer.c — lets the CUPTI stand-in (tests/fakecupti) see the launches this driver
 * stand-in accepts, as the real CUPTI sees the real driver's: it registers a callback with
 * fake_set_launch_observer (found with dlsym on this library).
 */
#include "fake.h"

typedef void (*fake_launch_observer)(const char *kernel, const unsigned grid[3], const unsigned block[3]);
static fake_launch_observer observer;

void fake_set_launch_observer(fake_launch_observer fn) { observer = fn; }

void fake_observe_launch(const char *kernel, const unsigned grid[3], const unsigned block[3]) {
    if (observer) observer(kernel, grid, block);
}
