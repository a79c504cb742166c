/* Licensed under the Apache License, Version 2.0.
 *
 * test_flight_portable.c: test_flight's cases again, on the bells
 * lessons_flight uses where there are no futexes (a mutex and condition
 * variable of their own), so that path is tested on Linux too.
 */
#define LESSONS_FLIGHT_NO_FUTEX 1
#include "store/lessons_flight.c"
#include "test_flight.c"
