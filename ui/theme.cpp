// The two palettes and the switch between them and the platform's.
#include "ui/theme.h"

#include <QApplication>
#include <QLabel>
#include <cmath>

namespace flashdesk::ui {

namespace {

struct Colors {
  QColor window, window_text, base, alternate_base, text, button, button_text, highlight,
      highlighted_text, link, link_visited, placeholder, tooltip_base, tooltip_text, disabled_text;
};

QPalette palette_of(const Colors& c) {
  QPalette p;
  p.setColor(QPalette::Window, c.window);
  p.setColor(QPalette::WindowText, c.window_text);
  p.setColor(QPalette::Base, c.base);
  p.setColor(QPalette::AlternateBase, c.alternate_base);
  p.setColor(QPalette::Text, c.text);
  p.setColor(QPalette::Button, c.button);
  p.setColor(QPalette::ButtonText, c.button_text);
  p.setColor(QPalette::BrightText, Qt::red);
  p.setColor(QPalette::Highlight, c.highlight);
  p.setColor(QPalette::HighlightedText, c.highlighted_text);
  p.setColor(QPalette::Link, c.link);
  p.setColor(QPalette::LinkVisited, c.link_visited);
  p.setColor(QPalette::PlaceholderText, c.placeholder);
  p.setColor(QPalette::ToolTipBase, c.tooltip_base);
  p.setColor(QPalette::ToolTipText, c.tooltip_text);
  // The bevel shades the styles draw frames with, derived from the button colour.
  p.setColor(QPalette::Light, c.button.lighter(150));
  p.setColor(QPalette::Midlight, c.button.lighter(125));
  p.setColor(QPalette::Mid, c.button.darker(130));
  p.setColor(QPalette::Dark, c.button.darker(200));
  p.setColor(QPalette::Shadow, Qt::black);
  for (QPalette::ColorRole role : {QPalette::WindowText, QPalette::Text, QPalette::ButtonText})
    p.setColor(QPalette::Disabled, role, c.disabled_text);
  return p;
}

double linear(double channel) {  // sRGB channel → linear light
  return channel <= 0.04045 ? channel / 12.92 : std::pow((channel + 0.055) / 1.055, 2.4);
}

double luminance(const QColor& c) {
  return 0.2126 * linear(c.redF()) + 0.7152 * linear(c.greenF()) + 0.0722 * linear(c.blueF());
}

}  // namespace

QString theme_key(ThemeChoice choice) {
  switch (choice) {
    case ThemeChoice::light:
      return QStringLiteral("light");
    case ThemeChoice::dark:
      return QStringLiteral("dark");
    case ThemeChoice::system:
      break;
  }
  return QStringLiteral("system");
}

std::optional<ThemeChoice> theme_from_key(const QString& key) {
  for (ThemeChoice c : {ThemeChoice::system, ThemeChoice::light, ThemeChoice::dark})
    if (key == theme_key(c)) return c;
  return std::nullopt;
}

bool is_dark(const QPalette& palette) {
  return palette.color(QPalette::WindowText).lightness() >
         palette.color(QPalette::Window).lightness();
}

QPalette light_palette() {
  return palette_of({.window = QColor(0xf3, 0xf3, 0xf3),
                     .window_text = QColor(0x1a, 0x1a, 0x1a),
                     .base = Qt::white,
                     .alternate_base = QColor(0xe8, 0xef, 0xf8),
                     .text = QColor(0x1a, 0x1a, 0x1a),
                     .button = QColor(0xe6, 0xe6, 0xe6),
                     .button_text = QColor(0x1a, 0x1a, 0x1a),
                     .highlight = QColor(0x2f, 0x6f, 0xd0),
                     .highlighted_text = Qt::white,
                     .link = QColor(0x0b, 0x57, 0xd0),
                     .link_visited = QColor(0x6a, 0x3d, 0xb8),
                     .placeholder = QColor(0x5f, 0x5f, 0x5f),
                     .tooltip_base = QColor(0xff, 0xff, 0xe6),
                     .tooltip_text = Qt::black,
                     .disabled_text = QColor(0x9a, 0x9a, 0x9a)});
}

QPalette dark_palette() {
  return palette_of({.window = QColor(0x2b, 0x2b, 0x2b),
                     .window_text = QColor(0xe8, 0xe8, 0xe8),
                     .base = QColor(0x1e, 0x1e, 0x1e),
                     .alternate_base = QColor(0x2f, 0x36, 0x40),
                     .text = QColor(0xe8, 0xe8, 0xe8),
                     .button = QColor(0x3a, 0x3a, 0x3a),
                     .button_text = QColor(0xe8, 0xe8, 0xe8),
                     .highlight = QColor(0x3d, 0x7b, 0xd9),
                     .highlighted_text = Qt::white,
                     .link = QColor(0x7c, 0xb8, 0xff),
                     .link_visited = QColor(0xc0, 0x9c, 0xff),
                     .placeholder = QColor(0xa8, 0xa8, 0xa8),
                     .tooltip_base = QColor(0x3a, 0x3a, 0x3a),
                     .tooltip_text = QColor(0xe8, 0xe8, 0xe8),
                     .disabled_text = QColor(0x80, 0x80, 0x80)});
}

void apply_theme(ThemeChoice choice) {
  switch (choice) {
    case ThemeChoice::light:
      QApplication::setPalette(light_palette());
      return;
    case ThemeChoice::dark:
      QApplication::setPalette(dark_palette());
      return;
    case ThemeChoice::system:
      break;
  }
  // A palette with no role set resolves every role against the platform's, and keeps doing so
  // when the desktop changes theme (Qt 6).
  QApplication::setPalette(QPalette());
}

QColor error_color(const QPalette& palette) {
  return is_dark(palette) ? QColor(0xff, 0x8a, 0x80) : QColor(0xc6, 0x28, 0x28);
}

void show_as_error(QLabel* label) {
  QPalette palette = label->palette();
  palette.setColor(QPalette::WindowText, error_color(QApplication::palette()));
  label->setPalette(palette);
}

double contrast_ratio(const QColor& a, const QColor& b) {
  const double la = luminance(a), lb = luminance(b);
  return (std::max(la, lb) + 0.05) / (std::min(la, lb) + 0.05);
}

}  // namespace flashdesk::ui
