/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the engine core (blk/submit.c, dispatch.c, complete.c,
 * device.c, sched.c, with blk/tags.c and the null backend): bio validation,
 * submission without a plug, plug flush rules (32 requests, 128 KiB, finish,
 * nesting, batch-allocated tags), back and front merging and every reason
 * to refuse a merge, partial and batched completion (per-bio status,
 * bad_sector, tags freed before end_io, end_io that resubmits), tag
 * exhaustion with a blocked submitter, several hardware queues, serialised
 * (flat-combining), busy and polled backends, mixed-device plugs, the
 * deadline scheduler and RQF_ELV, the QoS hook and BLK_BIO_TRACKED, the
 * synchronous helpers, statistics, direct access, and poison through the
 * core (which needs blk/slowpath.c).
 *
 * Most tests replace the null backend by a "capture" backend that keeps the
 * requests it is given in a test-owned list; the test then completes them
 * itself through blk_update_request() / blk_mq_end_request_batch(), exactly
 * as a backend would.  Internal headers are fair game here.
 *
 * The tests of the "regressions" case each reproduce a core defect found
 * while the engine was written (the comment above each says what it was and
 * where); they now pass.  Two of them run the once-hanging path on a helper
 * thread and give up after 5 s rather than hang.
 *
 * This file makes the suite; the tests are in test_core_<part>.c, one file per
 * part of the engine (submit, plug, complete, threads, dispatch), and the
 * helpers they share in core_capture.c / core_capture.h.
 */
#include <check.h>
#include <stdlib.h>

#include "core_capture.h"
#include "check_run.h"

static Suite *core_suite(void)
{
	Suite *s = suite_create("core");
	struct core_tcases tc = {
	        .basic = tcase_create("submit"),
	        .plug = tcase_create("plug"),
	        .merge = tcase_create("merge"),
	        .comp = tcase_create("completion"),
	        .mt = tcase_create("threads"),
	        .feat = tcase_create("features"),
	        /* Each of these shows a defect of the core described above the test. */
	        .bugs = tcase_create("regressions"),
	};

	/* The files in this order keep each test case's tests in their old order. */
	core_submit_tests(&tc);
	core_plug_tests(&tc);
	core_complete_tests(&tc);
	core_threads_tests(&tc);
	core_dispatch_tests(&tc);
	suite_add_tcase(s, tc.basic);
	suite_add_tcase(s, tc.plug);
	suite_add_tcase(s, tc.merge);
	suite_add_tcase(s, tc.comp);
	suite_add_tcase(s, tc.mt);
	suite_add_tcase(s, tc.feat);
	suite_add_tcase(s, tc.bugs);
	return s;
}

int main(void)
{
	setenv("CK_DEFAULT_TIMEOUT", "60", 0); /* meson sets 120; keep a generous default */
	return check_run(core_suite());
}
