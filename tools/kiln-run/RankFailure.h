//===- RankFailure.h - naming the rank whose death ended the job -*- C++
//-*-===//
//
// When one rank of an MPI job dies (killed, out of memory, a crash), the
// launcher ends the others with SIGTERM, and they stopped without a word
// of their own. kiln-run's ranks exchange their process ids and hosts when
// they start; a rank the launcher ends then says which ranks on its host
// are gone, before it ends as the signal would have ended it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_RUN_RANKFAILURE_H
#define KILN_TOOLS_KILN_RUN_RANKFAILURE_H

namespace kiln::run {

/// With several ranks: gathers every rank's process id and host (a
/// collective: every rank must call it), and installs the SIGTERM report.
/// Returns false, with the error printed, when the exchange fails.
bool watchForFailedRanks();

/// Restores SIGTERM's default before this rank ends on its own (an error
/// that ends every rank, or the end of the run), so that a signal then says
/// nothing wrong about the others.
void stopWatchingForFailedRanks();

} // namespace kiln::run

#endif // KILN_TOOLS_KILN_RUN_RANKFAILURE_H
