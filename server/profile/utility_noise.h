// The scale of the noise on the statistical-utility report (SelectionConfig
// .utility_noise_factor; docs/guides/PRIVACY.md "Noise on the utility report"). Oort (Lai et al.,
// OSDI 2021) proposes that clients report a noised utility; its authors' code (SymbioticLab/Oort
// training/param_server.py) draws the noise from N(0, (noise_factor x median reward)^2), the
// "median" refreshed after every round. The round engine asks for the deviation once per
// planning and hands it to every task it plans; the device adds the noise
// (common/dp_noise.h NoiseUtilityReport). Pure.
#ifndef FEDSCHED_SERVER_PROFILE_UTILITY_NOISE_H_
#define FEDSCHED_SERVER_PROFILE_UTILITY_NOISE_H_

#include <optional>

#include "server/profile/profile_book.h"

namespace fedsched::profile {

// Median of the statistical utilities (ClientState.statistical_utility, examples x loss) over
// the live clients that reported one (has_utility; retired slots excluded): the middle value,
// or the mean of the two middle values for an even count. These are the reports as received,
// so already noised when the option is on. nullopt when no client has reported. O(size()).
std::optional<double> MedianReportedUtility(const ProfileBook& book);

// The standard deviation a task's utility noise gets: noise_factor x MedianReportedUtility, in
// examples x loss; 0 when noise_factor is 0 (without scanning the book) or when no client has
// reported a utility yet (the first cohort then reports exactly; documented in config.proto).
// Precondition: noise_factor finite and >= 0 (ResolveRoundConfig checks it).
double UtilityNoiseStddev(const ProfileBook& book, double noise_factor);

}  // namespace fedsched::profile

#endif  // FEDSCHED_SERVER_PROFILE_UTILITY_NOISE_H_
