/* The duration intake of TuCCL's NCCL tuner plugin (libnccl-tuner-tuccl.so): how a source of
 * measured collective durations tells the tuner what a collective it chose took, so that the
 * tuner's runtime phase (TUCCL_ADAPT=1, docs/tuning-table.md "The runtime phase in NCCL") can
 * adapt. An NCCL profiler plugin is the intended caller: it sees every collective of every
 * communicator start and stop. The plugin exports this function beside ncclTunerPlugin_v2 .. _v7;
 * a caller finds it with dlopen("libnccl-tuner-tuccl.so", RTLD_NOW | RTLD_NOLOAD) (the library
 * NCCL loaded) and dlsym(handle, TUCCL_TUNER_REPORT_DURATION_SYMBOL).
 *
 * C, no dependencies: a profiler plugin written in C can include it. */
#ifndef TUCCL_TUNER_ADAPT_H_
#define TUCCL_TUNER_ADAPT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TUCCL_TUNER_REPORT_DURATION_SYMBOL "tucclTunerReportDuration"

/* What tucclTunerReportDuration did with a report. */
typedef enum {
  tucclTunerReportRecorded = 0,  /* matched to a call the tuner chose for, and recorded */
  tucclTunerReportIgnored = 1,   /* no such communicator with adaptation on, another rank's, or
                                    no call of that collective and size waiting for its time */
  tucclTunerReportInvalid = 2    /* a collective outside 0..4, a rank outside the communicator, or
                                    a duration that is negative or not a number */
} tucclTunerReportResult_t;

/* A collective of a communicator completed on `rank` and took `durationUs` microseconds.
 *
 * `commId`: the communicator as the tuner knows it: NCCL's commId argument of the v5+ tuner init.
 *   Under v2..v4, whose init has no id, it is (1 << 63) | (nRanks << 32) | n, where n counts the
 *   earlier v2..v4 inits of communicators of nRanks ranks in this process (0 for the first).
 * `collective`: NCCL's ncclFunc_t (Broadcast 0, Reduce 1, AllGather 2, ReduceScatter 3,
 *   AllReduce 4). `nBytes`: as the tuner's getCollInfo was asked (AllGather, ReduceScatter: the
 *   total); the report is matched to the oldest call of the same collective and power-of-two
 *   size bucket still waiting for its time (a communicator's collectives complete in order).
 * `rank`: the caller's rank in the communicator. The first report binds a tuner context of
 *   `commId` to `rank`; its own summaries are published under that rank.
 *
 * Thread-safe; never blocks for longer than a lock held for a few map operations; never fails
 * the caller's job. */
tucclTunerReportResult_t tucclTunerReportDuration(uint64_t commId, int rank, int collective, size_t nBytes,
                                                  double durationUs);

typedef tucclTunerReportResult_t (*tucclTunerReportDuration_t)(uint64_t commId, int rank, int collective,
                                                                size_t nBytes, double durationUs);

#ifdef __cplusplus
}
#endif

#endif /* TUCCL_TUNER_ADAPT_H_ */
