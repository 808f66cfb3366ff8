// Light and dark themes. "System" follows the desktop: the application palette is left to the
// platform (Qt 6.4 has no QStyleHints::colorScheme, so darkness is read from the palette itself);
// Light and Dark set a full palette of our own. Widgets draw from palette roles only, so a switch
// (or the desktop changing its theme) repaints them readable without restyling each one.
#pragma once

#include <QColor>
#include <QPalette>
#include <QString>
#include <optional>

class QLabel;

namespace flashdesk::ui {

enum class ThemeChoice { system, light, dark };

QString theme_key(ThemeChoice choice);  // "system", "light", "dark": how QSettings stores it
std::optional<ThemeChoice> theme_from_key(const QString& key);

// True when the window text is lighter than the window: a dark palette, whoever made it.
bool is_dark(const QPalette& palette);
QPalette light_palette();
QPalette dark_palette();

// Sets the application palette; `system` hands it back to the platform (which then follows the
// desktop's theme changes by itself).
void apply_theme(ThemeChoice choice);

// Red for error text that stays readable (contrast ≥ 4.5:1) on this palette's window colour.
QColor error_color(const QPalette& palette);
// Paints the label's text in error_color of the application palette; call again when it changes.
void show_as_error(QLabel* label);
// WCAG contrast ratio of two colours (1 … 21): the tests' readability measure.
double contrast_ratio(const QColor& a, const QColor& b);

}  // namespace flashdesk::ui
